"""Listeners: on loopback unless told otherwise, one line for each that is not (what is
exposed, what it trusts), and unix socket paths that never replace a user's file."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import free_port
from pubmote.cli.main import build_parser
from pubmote.core import addresses
from pubmote.core.addresses import is_loopback, log_exposure
from pubmote.faces.ndn import NdnFaceServer
from pubmote.faces.sp import SpEndpoint
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import DEFAULTS, SP_DEFAULTS, load_config
from pubmote_wire import sp

LOOPBACK = ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"]
EXPOSED = ["0.0.0.0", "::", "", "192.168.1.5", "10.0.0.1", "fe80::1", "gateway.example"]


def test_loopback_is_told_from_the_network() -> None:
    for h in LOOPBACK:
        assert is_loopback(h), h
    for h in EXPOSED:
        assert not is_loopback(h), h


def test_exposure_said_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.binds")
    with caplog.at_level(logging.WARNING, "test.binds"):
        for h in LOOPBACK:
            assert not log_exposure(log, "the thing", h, h, "trusts nobody")
        assert caplog.records == []
        for h in EXPOSED:
            assert log_exposure(log, "the thing", "%s:1" % h, h, "trusts nobody")
    assert len(caplog.records) == len(EXPOSED)
    assert all("reachable from other hosts: trusts nobody" in r.getMessage()
               for r in caplog.records)


def _actions(parser: argparse.ArgumentParser, path: str = "pubmote"
             ) -> list[tuple[str, argparse.Action]]:
    out: list[tuple[str, argparse.Action]] = []
    for a in parser._actions:  # argparse has no public walk of its actions
        if isinstance(a, argparse._SubParsersAction):
            for name, p in a.choices.items():
                out += _actions(p, path + " " + name)
        else:
            out.append((path, a))
    return out


def test_every_default_listen_address_is_loopback() -> None:
    # every option of every command that says where to bind or listen
    seen = 0
    for cmd, a in _actions(build_parser()):
        words = " ".join(a.option_strings) + " " + str(a.dest)
        if not any(w in words for w in ("bind", "listen", "host")) or a.default in (None, []):
            continue
        for d in (a.default if isinstance(a.default, list) else [a.default]):
            host = str(d).split("/")[2] if str(d).startswith("/ip") else str(d)
            assert is_loopback(host), "%s %s defaults to %r" % (cmd, a.option_strings, d)
            seen += 1
    assert seen >= 3  # mesh serve/id --listen, dht --bind: the walk found them
    assert is_loopback(DEFAULTS["dht_host"])
    for url in SP_DEFAULTS.values():
        assert is_loopback(url.split("//")[1].rsplit(":", 1)[0])


def test_bridge_says_so_for_each_exposed_listener(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    # no test binds beyond loopback: 127.0.0.1 is taken for the network here, so every
    # listener's line is seen while nothing leaves this host
    monkeypatch.setattr(addresses, "is_loopback", lambda host: False)
    ports = [free_port() for _ in range(6)]
    cfg = load_config(None, {
        "tcp": ["127.0.0.1:%d" % ports[0]], "udp": ["127.0.0.1:%d" % ports[1]],
        "sp_pub": ["tcp://127.0.0.1:%d" % ports[2]], "sp_sub": ["tcp://127.0.0.1:%d" % ports[3]],
        "ndn_face": ["tcp://127.0.0.1:%d" % ports[4]],
        # beyond loopback these two need their allow-lists (test_ingress_allow.py)
        "sp_sub_allow_from": ["127.0.0.1"], "sp_sub_allow_topics": ["/t"],
        "ndn_allow_from": ["127.0.0.1"], "ndn_allow_prefixes": ["/t"],
        "retained": ["/t"], "dht_key_file": str(tmp_path / "dht.key"),
        "mesh_listen": ["/ip4/127.0.0.1/tcp/%d" % ports[5]],
        "mesh_key_file": str(tmp_path / "mesh.key")})

    async def run() -> None:
        async with Bridge(cfg):
            pass

    with caplog.at_level(logging.WARNING):
        asyncio.run(asyncio.wait_for(run(), 60))
    lines = [r.getMessage() for r in caplog.records if "reachable from other hosts" in
             r.getMessage()]
    for what in ("board TCP face", "board UDP face", "SP PUB endpoint", "SP SUB endpoint",
                 "NDN face", "DHT node", "mesh listener"):
        assert sum(what in m for m in lines) == 1, (what, lines)


def _live_socket(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen()
    return s


def _stale_socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: what a killed bridge leaves


async def _start_sp(url: str) -> SpEndpoint:
    from pubmote.core.hub import Hub

    ep = SpEndpoint(Hub(), url, sp.PUB)
    await ep.start()
    return ep


async def _start_ndn(url: str) -> NdnFaceServer:
    srv = NdnFaceServer(url, lambda: 1, lambda f, p: None, lambda f: None)
    await srv.start()
    return srv


@pytest.mark.parametrize("scheme", ["ipc", "unix"])
def test_unix_socket_paths_never_replace_a_users_file(tmp_path: Path, scheme: str) -> None:
    start = _start_sp if scheme == "ipc" else _start_ndn

    async def refused(path: Path, why: str) -> None:
        try:
            ep = await start("%s://%s" % (scheme, path))
        except ValueError as e:
            assert str(path) in str(e) and why in str(e), e
        else:
            await ep.close()
            raise AssertionError("%s was bound over" % path)

    async def run() -> None:
        f = tmp_path / "notes.txt"
        f.write_text("the user's notes")
        await refused(f, "not a socket")
        assert f.read_text() == "the user's notes"
        d = tmp_path / "a-folder"
        d.mkdir()
        await refused(d, "not a socket")
        assert d.is_dir()
        await refused(tmp_path / "missing" / "s", "does not exist")
        live = _live_socket(tmp_path / "live.sock")
        try:
            await refused(tmp_path / "live.sock", "in use")
        finally:
            live.close()
        stale = tmp_path / "stale.sock"
        _stale_socket(stale)
        ep = await start("%s://%s" % (scheme, stale))  # a dead bridge's socket: taken
        assert stale.exists()
        await ep.close()
        assert not stale.exists()  # ours, removed at close

    asyncio.run(asyncio.wait_for(run(), 30))


def test_bridge_cli_refuses_a_file_as_socket_path(tmp_path: Path) -> None:
    f = tmp_path / "precious"
    f.write_text("keep me")
    for flag in ("--sp-pub", "--sp-sub", "--ndn-face"):
        url = ("unix://" if flag == "--ndn-face" else "ipc://") + str(f)
        r = subprocess.run([sys.executable, "-m", "pubmote", "bridge", "--no-view",
                            "--tcp", "127.0.0.1:%d" % free_port(), flag, url]
                           + [x for x in ("--sp-pub", "--sp-sub") if x != flag
                              for x in (x, "none")],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, XDG_CONFIG_HOME=str(tmp_path)))
        assert r.returncode == 2 and "not a socket" in r.stderr, (flag, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and f.read_text() == "keep me"
