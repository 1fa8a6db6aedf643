"""pubmote's mesh stack against real libp2p peers: js-libp2p 3 (node) and py-libp2p 0.8.1
(trio, its own venv). Both directions, ping, identify, many streams, a large flow-controlled
transfer, and a peer that vanishes mid-handshake."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterator

import pytest
from libp2p_peers import LoopRunner, PeerProcess, check_installed, start_js, start_py
from libp2p_relay import Relay
from mesh_util import echo_handler, sink_handler

from pubmote.p2p import DialError, Host, KeyPair, PeerEvent, PeerId
from pubmote.p2p.events import CONNECTED, DISCONNECTED, IDENTIFIED
from pubmote.p2p.identify import IdentifyInfo

IDENT0 = IdentifyInfo()

ECHO = "/pubmote/echo/1.0.0"
SINK = "/pubmote/sink/1.0.0"
AGENTS = {"js": "js-libp2p", "py": "py-libp2p"}
STARTERS = {"js": start_js, "py": start_py}


def make_host() -> Host:
    h = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
    h.set_stream_handler(ECHO, echo_handler)
    h.set_stream_handler(SINK, sink_handler)
    return h


def our_addr(h: Host) -> str:
    return str(h.listen_addrs[0].with_p2p(str(h.peer_id)))


def pattern(size: int, seed: int) -> bytes:
    base = bytes((i * 31 + seed) & 0xFF for i in range(256))
    return (base * (size // 256 + 1))[:size]


@pytest.fixture(scope="module", params=["js", "py"])
def peer(request: pytest.FixtureRequest, runner: LoopRunner) -> Iterator[tuple[str, PeerProcess]]:
    check_installed()
    kind = request.param
    p = runner.run(STARTERS[kind]())
    yield kind, p
    runner.run(p.kill())


async def wait_for(cond: object, timeout_s: float = 5.0) -> None:
    assert callable(cond)
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError("condition not met in %.1f s" % timeout_s)
        await asyncio.sleep(0.02)


def test_we_dial_ping_identify(runner: LoopRunner, peer: tuple[str, PeerProcess]) -> None:
    kind, p = peer

    async def go() -> None:
        events: list[PeerEvent] = []
        async with make_host() as h:
            h.add_event_handler(events.append)
            conn = await h.connect(p.addr)
            pid = PeerId.from_base58(p.peer_id)
            assert conn.peer_id == pid and conn.direction == "outbound"
            rtts = await h.ping(pid, 5)
            assert len(rtts) == 5 and all(0 < r < 1.0 for r in rtts)
            assert await conn.session.ping() < 1.0        # Yamux-level ping answered
            await wait_for(lambda: any(e.kind == IDENTIFIED for e in events))
            info = h.peer_info(pid)
            assert info is not None
            assert AGENTS[kind] in info.agent_version
            assert {"/ipfs/id/1.0.0", "/ipfs/ping/1.0.0", ECHO, SINK} <= set(info.protocols)
            assert info.public_key is not None and pid.matches(info.public_key)
            assert any(str(a).startswith("/ip4/127.0.0.1/tcp/") for a in info.listen_addrs)
            # and they learned ours: identify the other way, read back from the peer
            theirs = await p.call("identify", peer=str(h.peer_id))
            assert ECHO in theirs["protocols"] and "/ipfs/ping/1.0.0" in theirs["protocols"]
            assert theirs["agentVersion"].startswith("pubmote/")
            assert our_addr(h).split("/p2p/")[0] in theirs["listenAddrs"]
            assert [e.kind for e in events][:1] == [CONNECTED]
        assert DISCONNECTED in [e.kind for e in events]

    runner.run(go())


def test_they_dial_us_ping_identify(runner: LoopRunner, peer: tuple[str, PeerProcess]) -> None:
    kind, p = peer

    async def go() -> None:
        events: list[PeerEvent] = []
        async with make_host() as h:
            h.add_event_handler(events.append)
            res = await p.call("dial", addr=our_addr(h))
            assert res["peer"] == str(h.peer_id)
            await wait_for(lambda: PeerId.from_base58(p.peer_id) in h.connected_peers())
            conn = h.connection(PeerId.from_base58(p.peer_id))
            assert conn is not None and conn.direction == "inbound"
            rtts = (await p.call("ping", peer=str(h.peer_id), count=5))["rtts"]
            assert len(rtts) == 5
            theirs = await p.call("identify", peer=str(h.peer_id))
            assert {ECHO, SINK, "/ipfs/id/1.0.0", "/ipfs/ping/1.0.0"} <= set(theirs["protocols"])
            assert theirs["protocolVersion"] == "ipfs/0.1.0"
            assert theirs["observedAddr"].startswith("/ip4/127.0.0.1/tcp/")
            # we identify them on inbound connections too
            await wait_for(lambda: h.peer_info(PeerId.from_base58(p.peer_id)) is not None)
            info = h.peer_info(PeerId.from_base58(p.peer_id))
            assert info is not None and AGENTS[kind] in info.agent_version

    runner.run(go())


def test_many_concurrent_streams(runner: LoopRunner, peer: tuple[str, PeerProcess]) -> None:
    _kind, p = peer
    n = 64

    async def one(h: Host, pid: PeerId, i: int) -> None:
        st = await h.new_stream(pid, [ECHO])
        data = pattern(4096, i)
        await st.write(data)
        back = await st.readexactly(len(data))
        await st.close()
        assert back == data

    async def go() -> None:
        async with make_host() as h:
            await h.connect(p.addr)
            pid = PeerId.from_base58(p.peer_id)
            await asyncio.gather(*(one(h, pid, i) for i in range(n)))
            # and they open as many to us at once
            await p.call("streams", peer=str(h.peer_id), count=n, size=4096, timeout_s=30)
            conn = h.connection(pid)
            assert conn is not None
            await wait_for(lambda: conn.session.stream_count <= 2)

    runner.run(go(), 45)


def test_large_transfer_with_flow_control(runner: LoopRunner,
                                          peer: tuple[str, PeerProcess]) -> None:
    _kind, p = peer
    size = 8 * 1024 * 1024   # 32 receive windows: the transfer lives on window updates

    async def go() -> None:
        async with make_host() as h:
            await h.connect(p.addr)
            pid = PeerId.from_base58(p.peer_id)
            st = await h.new_stream(pid, [ECHO])
            data = pattern(size, 3)

            async def writer() -> None:
                await st.write(data)
                await st.close()

            wt = asyncio.ensure_future(writer())
            back = await st.read_until_eof(size + 1)
            await wt
            assert back == data
            # they push 8 MiB into our sink, and echo 2 MiB through ours
            res = await p.call("sink", peer=str(h.peer_id), size=size, timeout_s=40)
            assert res["got"] == size
            await p.call("echo", peer=str(h.peer_id), size=2 * 1024 * 1024, timeout_s=40)

    runner.run(go(), 60)


def _kill_when(p: PeerProcess, way: str, at_bytes: int) -> Relay:
    # multistream header + "/noise" (28 bytes), then Noise message 1 (2 + 32 bytes): the
    # peer dies right after starting the handshake.
    def hook(direction: str, total: int) -> None:
        if direction == way and total >= at_bytes and p.proc.returncode is None:
            os.killpg(p.proc.pid, signal.SIGKILL)

    host, port = p.addr.split("/")[2], int(p.addr.split("/")[4])
    return Relay(host, port, hook)


def test_peer_vanishes_mid_handshake_when_we_dial(runner: LoopRunner,
                                                  peer: tuple[str, PeerProcess],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    kind, p = peer

    async def go() -> None:
        victim = await STARTERS[kind]()
        relay = await _kill_when(victim, "up", 62).start()
        try:
            async with make_host() as h:
                t0 = time.monotonic()
                with pytest.raises(DialError):
                    await h.connect("/ip4/127.0.0.1/tcp/%d/p2p/%s" % (relay.port, victim.peer_id),
                                    timeout_s=10)
                assert time.monotonic() - t0 < 8
                assert h.connected_peers() == []
                # the host is fine: the module's peer is still reachable
                await h.connect(p.addr)
                assert await h.ping(PeerId.from_base58(p.peer_id), 1)
        finally:
            await relay.close()
            await victim.kill()

    with caplog.at_level(logging.INFO, logger="pubmote.p2p"):
        runner.run(go())
    assert any("dial" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)


def test_peer_vanishes_mid_handshake_when_they_dial(runner: LoopRunner,
                                                    peer: tuple[str, PeerProcess],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    kind, p = peer

    async def go() -> None:
        victim = await STARTERS[kind]()
        try:
            async with make_host() as h:
                host, port = "127.0.0.1", h.listen_addrs[0].tcp_host_port()[1]

                def hook(direction: str, total: int) -> None:
                    if direction == "up" and total >= 62 and victim.proc.returncode is None:
                        os.killpg(victim.proc.pid, signal.SIGKILL)

                relay = await Relay(host, port, hook).start()
                try:
                    with pytest.raises(RuntimeError):
                        await victim.call("dial", addr="/ip4/127.0.0.1/tcp/%d/p2p/%s"
                                          % (relay.port, h.peer_id), timeout_s=10)
                    await wait_for(lambda: h.failed_handshakes >= 1, 8)
                    assert h.connected_peers() == []
                    # still serving: the module's peer dials in fine
                    await p.call("dial", addr=our_addr(h))
                    await p.call("ping", peer=str(h.peer_id), count=2)
                finally:
                    await relay.close()
        finally:
            await victim.kill()

    with caplog.at_level(logging.INFO, logger="pubmote.p2p"):
        runner.run(go())
    assert any("inbound handshake" in r.getMessage() for r in caplog.records)


def test_wrong_peer_id_is_refused(runner: LoopRunner, peer: tuple[str, PeerProcess]) -> None:
    _kind, p = peer

    async def go() -> None:
        async with make_host() as h:
            impostor = KeyPair.generate().peer_id
            addr = p.addr.split("/p2p/")[0] + "/p2p/" + str(impostor)
            with pytest.raises(DialError, match="expected"):
                await h.connect(addr)
            assert h.connected_peers() == []

    runner.run(go())


def test_identify_push_both_ways(runner: LoopRunner, peer: tuple[str, PeerProcess]) -> None:
    """Protocols registered while connected reach the other side (GossipSub relies on it)."""
    kind, p = peer

    async def go() -> None:
        events: list[PeerEvent] = []
        async with make_host() as h:
            h.add_event_handler(events.append)
            await h.connect(p.addr)
            pid = PeerId.from_base58(p.peer_id)
            await wait_for(lambda: h.peer_info(pid) is not None)
            proto = "/pubmote/late-%s/1.0.0" % kind
            await p.call("handle", protocol=proto)
            if kind == "js":      # js-libp2p pushes by itself; py-libp2p 0.8.1 does not
                await wait_for(lambda: proto in (h.peer_info(pid) or IDENT0).protocols)
            # ours: registered now, pushed to the peer, which can then use it
            h.set_stream_handler("/pubmote/ours-late/1.0.0", echo_handler)

            async def pushed() -> bool:
                try:
                    res = await p.call("protocols", peer=str(h.peer_id))
                except RuntimeError as e:  # py-libp2p: not in its peer store yet
                    if "peer ID not found" in str(e):
                        return False
                    raise
                return "/pubmote/ours-late/1.0.0" in res["protocols"]

            t0 = time.monotonic()
            while not await pushed():
                assert time.monotonic() - t0 < 60, "identify push did not arrive"
                await asyncio.sleep(0.1)

    runner.run(go())
