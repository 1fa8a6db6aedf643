"""The mesh host and its connection manager: one connection per peer, concurrent and
simultaneous dials, limits, backoff, events, handler faults, clean close, and the CLI."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from mesh_util import addr_of, echo_handler, make_host

from pubmote.p2p import DialError, PeerEvent, Stream, StreamReset
from pubmote.p2p.connmgr import Backoff, DialBackoff
from pubmote.p2p.errors import NegotiationError
from pubmote.p2p.events import CONNECTED, DISCONNECTED, IDENTIFIED

LOGGER = "pubmote.p2p"
ROOT = Path(__file__).resolve().parents[3]


def run(coro: Coroutine[Any, Any, None], timeout_s: float = 60.0) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout_s))


async def settle(cond: Any, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not cond():
        assert loop.time() - t0 < timeout_s, "condition not met"
        await asyncio.sleep(0.02)


def test_backoff_is_jittered_and_capped() -> None:
    lo = Backoff(base_s=1.0, cap_s=10.0, rng=lambda: 0.0)
    hi = Backoff(base_s=1.0, cap_s=10.0, rng=lambda: 0.999)
    assert lo.delay_s(0) == 0.0
    assert [lo.delay_s(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert 1.49 < hi.delay_s(1) < 1.5
    assert lo.delay_s(50) == 5.0 and hi.delay_s(50) == 10.0
    db = DialBackoff(lo, max_entries=2)
    db.failed("a")
    assert db.remaining_s("a") > 0
    db.succeeded("a")
    assert db.remaining_s("a") == 0
    for k in "bcd":
        db.failed(k)
    assert len(db._state) == 2        # bounded


def test_events_identify_and_one_connection_for_concurrent_dials() -> None:
    async def go() -> None:
        events: list[PeerEvent] = []
        async with make_host() as a, make_host() as b:
            a.add_event_handler(events.append)
            conns = await asyncio.gather(*(a.connect(addr_of(b)) for _ in range(5)))
            assert all(c is conns[0] for c in conns)
            await settle(lambda: any(e.kind == IDENTIFIED for e in events))
            info = a.peer_info(b.peer_id)
            assert info is not None and "/ipfs/ping/1.0.0" in info.protocols
            assert a.addrs(b.peer_id) == [b.listen_addrs[0]]
            assert await a.connect(addr_of(b)) is conns[0]     # reused
            # dial by PeerId through the addresses identify taught us
            await conns[0].close()
            await settle(lambda: a.connected_peers() == [])
            assert (await a.dial_peer(b.peer_id)).peer_id == b.peer_id
        kinds = [e.kind for e in events]
        assert kinds[:2] == [CONNECTED, IDENTIFIED] and DISCONNECTED in kinds

    run(go())


def test_simultaneous_dials_keep_one_connection() -> None:
    async def go() -> None:
        async with make_host() as a, make_host() as b:
            await asyncio.gather(a.connect(addr_of(b)), b.connect(addr_of(a)),
                                 return_exceptions=True)

            def agreed() -> bool:
                ca, cb = a.connection(b.peer_id), b.connection(a.peer_id)
                return ca is not None and cb is not None and ca.direction != cb.direction

            await settle(agreed)
            ca, cb = a.connection(b.peer_id), b.connection(a.peer_id)
            assert ca is not None and cb is not None
            assert len(a.connections) == 1 and len(b.connections) == 1
            assert {ca.direction, cb.direction} == {"inbound", "outbound"}  # the same one
            assert await a.ping(b.peer_id) and await b.ping(a.peer_id)

    run(go())


def test_connection_limit_refuses_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host(max_connections=1) as hub, make_host() as a, make_host() as b:
            await a.connect(addr_of(hub))
            with pytest.raises(DialError):
                await b.connect(addr_of(hub))
            assert hub.refused_inbound == 1 and len(hub.connections) == 1
            with pytest.raises(DialError, match="limit"):
                await hub.connect(addr_of(b))

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    assert any("connection limit" in r.getMessage() for r in caplog.records)


def test_failed_dial_backs_off_and_retries() -> None:
    async def go() -> None:
        async with make_host(backoff=Backoff(base_s=0.05, cap_s=0.2)) as a, make_host() as b:
            port = b.listen_addrs[0].tcp_host_port()[1]
            dead = "/ip4/127.0.0.1/tcp/%d/p2p/%s" % (port, b.peer_id)
            await b.close()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(DialError, match="Connection"):
                await a.connect(dead, attempts=3)
            assert loop.time() - t0 >= 0.05     # slept between attempts
            with pytest.raises(DialError, match="backing off"):
                await a.connect(dead)
            await asyncio.sleep(0.5)
            with pytest.raises(DialError, match="failed"):
                await a.connect(dead)           # tried again once the backoff passed

    run(go())


def test_handler_faults_reset_only_their_stream(caplog: pytest.LogCaptureFixture) -> None:
    async def boom(st: Stream) -> None:
        await st.read()
        raise RuntimeError("handler bug")

    async def go() -> None:
        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/boom", boom)
            b.set_stream_handler("/echo", echo_handler)
            await a.connect(addr_of(b))
            st = await a.new_stream(b.peer_id, ["/boom"])
            await st.write(b"x")
            with pytest.raises(StreamReset):
                await st.read()
            with pytest.raises(NegotiationError):
                await a.new_stream(b.peer_id, ["/nope/1", "/nope/2"])
            e = await a.new_stream(b.peer_id, ["/nope", "/echo"])
            assert e.protocol == "/echo"
            await e.write(b"still fine")
            assert await e.readexactly(10) == b"still fine"

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    assert any("handler for /boom failed" in r.getMessage() for r in caplog.records)


def test_close_is_clean_and_idempotent() -> None:
    async def go() -> None:
        events: list[PeerEvent] = []
        b = make_host()
        b.add_event_handler(events.append)
        async with make_host() as a:
            await b.start()
            await a.connect(addr_of(b))
            st = await a.new_stream(b.peer_id, ["/ipfs/ping/1.0.0"])
            await b.close()
            await b.close()
            await settle(lambda: a.connected_peers() == [])
            with pytest.raises(StreamReset):
                await st.read()
            assert [e.kind for e in events if e.kind == DISCONNECTED] == [DISCONNECTED]
            with pytest.raises(DialError):
                await a.connect(addr_of(b))
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()
                    and "mesh" in repr(t.get_coro())]

    run(go())


def _pubmote(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pubmote", *args],
                          capture_output=True, text=True, timeout=30, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_cli_mesh_id(tmp_path: Path) -> None:
    key = tmp_path / "k" / "mesh.key"
    r = _pubmote("mesh", "id", "--key-file", str(key))
    assert r.returncode in (1, 2) and "does not exist" in r.stderr and not key.parent.exists()
    key.parent.mkdir()
    r = _pubmote("mesh", "id", "--key-file", str(key), "--listen", "/ip4/127.0.0.1/tcp/4001")
    assert r.returncode == 0, r.stderr
    peer = r.stdout.split()[1]
    assert peer.startswith("12D3KooW")
    assert "listen: /ip4/127.0.0.1/tcp/4001/p2p/" + peer in r.stdout
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert _pubmote("mesh", "id", "--key-file", str(key)).stdout.split()[1] == peer
    # the default key file lives under XDG_CONFIG_HOME
    r = _pubmote("mesh", "id", env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert r.returncode == 0 and (tmp_path / "cfg" / "pubmote" / "mesh.key").exists()
    os.chmod(key, 0o644)
    r = _pubmote("mesh", "id", "--key-file", str(key))
    assert r.returncode == 2 and "chmod 600" in r.stderr  # refused as it is parsed


def test_cli_mesh_ping() -> None:
    async def go() -> None:
        async with make_host() as h:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pubmote", "mesh", "ping", addr_of(h),
                "--count", "2", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 20)
            assert proc.returncode == 0, err
            text = out.decode()
            assert "ping 2:" in text and "agent: pubmote/" in text
            r = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pubmote", "mesh", "ping",
                "/ip4/127.0.0.1/tcp/1/p2p/" + str(h.peer_id), "--timeout", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            _o, e = await asyncio.wait_for(r.communicate(), 20)
            assert r.returncode == 1 and b"failed" in e

    run(go(), 90)


def test_unspecified_listen_address_is_advertised_as_the_reached_one() -> None:
    async def go() -> None:
        from pubmote.p2p import Host, KeyPair

        async with Host(KeyPair.generate(), listen_addrs=["/ip4/0.0.0.0/tcp/0"]) as h, \
                make_host() as a:
            port = h.listen_addrs[0].tcp_host_port()[1]
            await a.connect("/ip4/127.0.0.1/tcp/%d/p2p/%s" % (port, h.peer_id))
            await settle(lambda: a.peer_info(h.peer_id) is not None)
            info = a.peer_info(h.peer_id)
            assert info is not None
            assert [str(x) for x in info.listen_addrs] == ["/ip4/127.0.0.1/tcp/%d" % port]

    run(go())
