"""The listeners without authentication of their own (the SP SUB endpoint, the NDN face)
beyond loopback: refused at start without both allow-lists (one line naming the endpoint
and the keys to set, exit 2 from the CLI); with them, a source outside the list closed at
accept and a topic or prefix outside refused, each counted in the status line.

No test binds beyond loopback: is_loopback is patched so that 127.0.0.1 is taken for the
network (as test_binds.py does), and the outsider connects from 127.0.0.2 (all of
127.0.0.0/8 is loopback on Linux)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from attackers import Peer, open_conns, rib_register
from rich.console import Console

from e2e import free_port, wait_until
from pubmote.core import addresses
from pubmote.core.allowlist import AllowList
from pubmote.core.hub import Hub
from pubmote.faces.ndn import NdnFaceServer
from pubmote.faces.sp import SpEndpoint
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config
from pubmote.gateway.status import status_line
from pubmote.gateway.view import render
from pubmote_wire import name, notify, sp

INSIDER, OUTSIDER = "127.0.0.1", "127.0.0.2"


@pytest.fixture
def exposed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(addresses, "is_loopback", lambda host: False)


def _bridge(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pubmote", "bridge", "--no-view",
                           "--sp-pub", "none", *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, XDG_CONFIG_HOME=str(tmp_path)))


def test_cli_refuses_an_exposed_listener_without_its_lists(tmp_path: Path) -> None:
    # refused by the configuration check, before anything is bound
    cases = [(["--sp-sub", "tcp://*:5561"], "the SP SUB endpoint tcp://*:5561",
              ("sp_sub_allow_from", "--sp-sub-allow-from", "sp_sub_allow_topics",
               "--sp-sub-allow-topics")),
             (["--sp-sub", "tcp://0.0.0.0:5561", "--sp-sub-allow-from", "10.0.0.0/8"],
              "the SP SUB endpoint tcp://0.0.0.0:5561", ("sp_sub_allow_topics",)),
             (["--sp-sub", "none", "--ndn-face", "tcp://0.0.0.0:6363",
               "--ndn-allow-prefixes", "/myapp"], "the NDN face tcp://0.0.0.0:6363",
              ("ndn_allow_from", "--ndn-allow-from", "ndn_allow_prefixes"))]
    for args, where, names in cases:
        r = _bridge(args, tmp_path)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and where in lines[0] and "127.0.0.1" in lines[0], r.stderr
        assert all(n in lines[0] for n in names), (names, r.stderr)
    r = _bridge(["--sp-sub-allow-from", "10.0.0.0/33"], tmp_path)
    assert r.returncode == 2 and "--sp-sub-allow-from" in r.stderr, r.stderr


def test_library_refuses_an_exposed_listener_without_its_lists(exposed: None) -> None:
    async def run() -> None:
        port = free_port()
        url = "tcp://127.0.0.1:%d" % port
        for allow in (None, AllowList(["127.0.0.1"]), AllowList([], ["/t"])):
            with pytest.raises(ValueError, match="sp_sub_allow_from"):
                await SpEndpoint(Hub(), url, sp.SUB, allow=allow).start()
            with pytest.raises(ValueError, match="ndn_allow_prefixes"):
                await NdnFaceServer(url, lambda: 1, lambda f, p: None, lambda f: None,
                                    allow=allow).start()
        # nothing was bound: the port is free
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
        ep = SpEndpoint(Hub(), url, sp.PUB)  # the PUB endpoint: logged, not refused
        await ep.start()
        await ep.close()

    asyncio.run(asyncio.wait_for(run(), 30))


def _sp_msg(line: bytes) -> bytes:
    return bytes(sp.encode_msg(line))


def test_sp_sub_outsiders_and_other_topics_refused(tmp_path: Path, exposed: None) -> None:
    port = free_port()
    cfg = load_config(None, {"sp_sub": ["tcp://127.0.0.1:%d" % port],
                             "sp_sub_allow_from": ["127.0.0.1/32"],
                             "sp_sub_allow_topics": ["/pubmote/demo/sim1/command"]})

    async def run() -> None:
        async with Bridge(cfg) as bridge:
            ep = bridge.sp[0]
            hello = sp.header(sp.PUB)
            peers: list[Peer] = []
            try:
                outsiders = await open_conns(port, [OUTSIDER], 3, hello)
                peers += outsiders
                await wait_until(lambda: ep.allow.refused_source == len(outsiders) > 0
                                 and all(p.closed for p in outsiders), 30,
                                 "the outsiders closed at accept")
                assert ep.clients() == 0
                peers += await open_conns(port, [INSIDER], 1, hello)
                await wait_until(lambda: ep.clients() == 1, 30, "the insider connected")
                insider = peers[-1]
                for i in range(5):
                    insider.write(_sp_msg(b"/pubmote/demo/sim2/command|no-%d" % i))
                insider.write(_sp_msg(b"/pubmote/demo/sim1|no"))  # a prefix of the prefix
                insider.write(_sp_msg(b"/pubmote/demo/sim1/command|yes"))
                insider.write(_sp_msg(b"/pubmote/demo/sim1/command/set|yes"))
                await wait_until(lambda: ep.counters["received"] == 2, 30,
                                 "the allowed messages received")
                assert ep.allow.refused_name == 6, ep.allow.refused_name
                assert not insider.closed  # a refused topic does not cost the connection
                line = status_line(bridge)
                assert "1 clients, %d refused, 2 received, 0 bad, 6 refused messages" % (
                    len(outsiders)) in line, line
                console = Console(record=True, width=240)
                console.print(render(bridge))
                view = console.export_text()
                assert "2 received, 0 bad, %d refused" % (len(outsiders) + 6) in view, view
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()

    asyncio.run(asyncio.wait_for(run(), 90))


def _notify_pkt(publisher: str, topic: str) -> bytes:
    pub, t, nonce = name.from_uri(publisher), name.from_uri(topic), os.urandom(4)
    d = bytearray(256)
    nd = notify.encode_msg_data(d, 0, pub, t, nonce, b"x")
    buf = bytearray(600)
    n = notify.encode_notify_interest(buf, 0, t, pub, nonce, inline=bytes(d[:nd]))
    return bytes(buf[:n])


def test_ndn_face_outsiders_and_other_prefixes_refused(exposed: None) -> None:
    port = free_port()
    cfg = load_config(None, {"ndn_face": ["tcp://127.0.0.1:%d" % port],
                             "ndn_allow_from": ["127.0.0.0/32", "127.0.0.1"],
                             "ndn_allow_prefixes": ["/myapp"]})

    async def run() -> None:
        async with Bridge(cfg) as bridge:
            srv, hub = bridge.ndn[0], bridge.hub
            peers: list[Peer] = []
            try:
                outsiders = await open_conns(port, [OUTSIDER], 2, rib_register("/myapp"))
                peers += outsiders
                await wait_until(lambda: srv.allow.refused_source == len(outsiders) > 0
                                 and all(p.closed for p in outsiders), 30,
                                 "the outsiders closed at accept")
                assert not srv.faces and hub.counters["rib_commands"] == 0
                peers += await open_conns(port, [INSIDER], 1)
                await wait_until(lambda: len(srv.faces) == 1, 30, "the insider connected")
                app = peers[-1]
                app.write(rib_register("/other"))
                app.write(rib_register("/myapp-not"))  # not under /myapp: a component differs
                await wait_until(lambda: hub.counters["rib_refused"] == 2, 30,
                                 "the registers outside refused")
                app.write(rib_register("/myapp/data"))
                await wait_until(lambda: hub.counters["rib_commands"] == 3, 30,
                                 "the register inside answered")
                assert hub.counters["rib_refused"] == 2
                before = hub.counters["messages"]
                app.write(_notify_pkt("/myapp", "/pubmote/demo/sim1/command"))
                await wait_until(lambda: srv.allow.refused_name == 3, 30,
                                 "the notify outside refused")
                app.write(_notify_pkt("/myapp", "/myapp/temp"))
                await wait_until(lambda: hub.counters["messages"] == before + 1, 30,
                                 "the notify inside published")
                assert srv.allow.refused_name == 3 and not app.closed
                line = status_line(bridge)
                assert "1 apps, %d refused, 3 outside the allowed names" % len(outsiders) \
                    in line, line
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()

    asyncio.run(asyncio.wait_for(run(), 90))


def test_loopback_binds_need_no_lists() -> None:
    # as before: loopback SP SUB and NDN face start without lists and admit everyone
    cfg = load_config(None, {"sp_sub": ["tcp://127.0.0.1:%d" % free_port()],
                             "ndn_face": ["tcp://127.0.0.1:%d" % free_port()]})

    async def run() -> None:
        async with Bridge(cfg) as bridge:
            assert bridge.sp[0].allow.nets == [] and bridge.ndn[0].allow.prefixes == []
            port = int(cfg["sp_sub"][0].rsplit(":", 1)[1])
            peers = await open_conns(port, [OUTSIDER], 1, sp.header(sp.PUB))
            try:
                await wait_until(lambda: bridge.sp[0].clients() == 1, 30, "connected")
                peers[0].write(_sp_msg(b"/anything|x"))
                await wait_until(lambda: bridge.sp[0].counters["received"] == 1, 30,
                                 "received")
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()

    asyncio.run(asyncio.wait_for(run(), 60))
