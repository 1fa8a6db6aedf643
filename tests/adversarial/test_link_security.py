"""Attacks on the WiFi board links, on a running bridge with simulated boards (the unix
port running the firmware) on TCP with TLS: an eavesdropper on the path sees no reading
and no command; a board will not talk to a gateway it does not trust (wrong certificate,
wrong pin, wrong name); a plaintext board is refused where encryption is required and
counted, logged once; garbage and stalled handshakes on the TLS port are contained and
counted; a TLS key others can read stops the start with the chmod to run; UDP faces,
which cannot be encrypted, are refused where encryption is required. In every scenario
a genuine board keeps being served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from e2e import APPS, Collector, Publisher, boards_registered, free_port, free_ports, wait_until
from pubmote.boards.fleet import SimFleet
from pubmote.core.tlscert import (
    CertError,
    cert_der,
    fingerprint,
    load_cert,
    make_gateway_cert,
)
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config

TEMP = b"/pubmote/demo/%s/temperature|"


def _urls() -> dict[str, list[str]]:
    pub, sub = free_ports(2)
    return {"sp_pub": ["tcp://127.0.0.1:%d" % pub], "sp_sub": ["tcp://127.0.0.1:%d" % sub]}


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return make_gateway_cert(tmp_path / "tls")


@contextlib.asynccontextmanager
async def tls_bridge(tmp: Path, pair: tuple[Path, Path], boards: list[dict[str, Any]],
                     **cfg: Any) -> AsyncIterator[tuple[Bridge, dict[str, list[str]]]]:
    """A bridge with TLS on its --tcp face and boards sim1..simN on tcp links, each given
    the gateway's certificate as `pubmote deploy --gateway-cert` would (the fleet does it),
    then board i's config updated with boards[i]."""
    urls = _urls()
    conf = load_config(None, {
        "sim_boards": len(boards), "sim_dir": str(tmp), "sim_period_ms": 200,
        "timeout_ms": 1000, "sim_app": "demo", "sim_app_dir": str(APPS),
        "sim_app_config": {"link": "tcp"}, "tcp": ["127.0.0.1:%d" % free_port()],
        "tcp_tls_cert": str(pair[0]), "tcp_tls_key": str(pair[1]), **urls, **cfg})
    fleet = SimFleet.from_config(conf)
    for board, extra in zip(fleet.boards, boards, strict=True):
        board.config.update(extra)
    async with Bridge(conf, fleet=fleet) as bridge:
        yield bridge, urls


def _log(tmp: Path, board: str) -> str:
    p = tmp / (board + ".log")
    return p.read_text(errors="replace") if p.exists() else ""


async def _still_served(col: Collector, board: str = "sim1", more: int = 3) -> None:
    """The genuine board's readings keep reaching the SP subscriber."""
    have = len(col.with_prefix(TEMP % board.encode()))
    await col.wait_for(TEMP % board.encode(), have + more, timeout_s=30)


class Tap:
    """A TCP relay between a board and the bridge that keeps every byte it carries: what
    anyone on the WiFi network sees."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = b""
        self.down = b""
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _conn(self, br: asyncio.StreamReader, bw: asyncio.StreamWriter) -> None:
        # (cancelled when the test's loop ends: the relay just stops)
        with contextlib.suppress(OSError, asyncio.CancelledError):
            gr, gw = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(self._pipe(br, gw, "up"), self._pipe(gr, bw, "down"))

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, way: str) -> None:
        with contextlib.suppress(OSError):
            while data := await r.read(4096):
                setattr(self, way, getattr(self, way) + data)
                w.write(data)
                await w.drain()
        w.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def test_eavesdropper_sees_no_reading_and_no_command(tmp_path: Path,
                                                     pair: tuple[Path, Path]) -> None:
    async def run() -> None:
        tap = Tap(0)
        await tap.start()
        try:
            async with tls_bridge(tmp_path, pair, [{"port": tap.port}]) as (bridge, urls):
                tap.target_port = int(bridge.cfg["tcp"][0].rsplit(":", 1)[1])
                await boards_registered(bridge, ["sim1"])
                col = Collector(urls["sp_pub"][0], b"/pubmote/demo/sim1/")
                pub = Publisher(urls["sp_sub"][0])
                try:
                    await col.wait_for(TEMP % b"sim1", 3)
                    await wait_until(lambda: bool(bridge.hub.board("sim1").filters), 10,
                                     "the board's command subscription")
                    got: list[bytes] = []
                    for i in range(100):  # SP PUB to SUB may drop the first sends
                        await pub.send(b"/pubmote/demo/sim1/command|secret-%d" % i)
                        with contextlib.suppress(AssertionError):
                            got = await col.wait_for(b"/pubmote/demo/sim1/ack|", 1, 0.5)
                            break
                    assert got and got[0].startswith(b"/pubmote/demo/sim1/ack|secret-")
                finally:
                    col.close()
                    pub.close()
                assert bridge.link_guard is not None
                assert bridge.link_guard.counters["tls_handshakes"] >= 1
                face = next(f for f in bridge.faces if getattr(f, "board", None) == "sim1")
                assert face._transport.get_extra_info("ssl_object") is not None
        finally:
            tap.close()
        assert tap.up[:1] == b"\x16" and len(tap.up) > 1000 and len(tap.down) > 500
        # (the ClientHello names the certificate the board expects, pubmote-gateway, in
        # clear, as TLS does: the names below are NDN name components and payloads)
        for clear in (b"\x08\x07pubmote", b"temperature", b"sim1", b"register", b"secret-"):
            assert clear not in tap.up and clear not in tap.down, clear

    asyncio.run(run())


def _other_cert(tmp: Path) -> tuple[Path, Path]:
    return make_gateway_cert(tmp / "impostor")


WRONG_GATEWAY = {
    # the board trusts another certificate than the one this gateway shows
    "ca": (lambda tmp: {"tls_ca": cert_der(load_cert(_other_cert(tmp)[0])).hex()},
           "certificate did not verify"),
    # the board pins another certificate's SHA-256
    "fingerprint": (lambda tmp: {"tls_ca": None, "tls_fingerprint": fingerprint(
        load_cert(_other_cert(tmp)[0]))}, "not the pinned one"),
    # the right certificate, but the board expects another gateway's name in it
    "name": (lambda tmp: {"tls_name": "gateway-b"}, "certificate did not verify"),
}


@pytest.mark.parametrize("case", sorted(WRONG_GATEWAY))
def test_board_refuses_a_gateway_it_does_not_trust(tmp_path: Path, pair: tuple[Path, Path],
                                                   case: str) -> None:
    make_extra, said = WRONG_GATEWAY[case]
    wrong = make_extra(tmp_path)

    async def run() -> None:
        async with tls_bridge(tmp_path, pair, [{}, wrong]) as (bridge, urls):
            guard = bridge.link_guard
            assert guard is not None
            col = Collector(urls["sp_pub"][0], b"/pubmote/demo/")
            try:
                await boards_registered(bridge, ["sim1"])
                await wait_until(lambda: "pubmote: TLS link to" in _log(tmp_path, "sim2"), 30,
                                 "sim2 to say why it refused the gateway")
                # sim2 keeps trying (each attempt ends in the handshake or right after it)
                start = sum(guard.counters.values())
                await wait_until(lambda: sum(guard.counters.values()) >= start + 2, 30,
                                 "sim2 to retry")
                await _still_served(col)
            finally:
                col.close()
            assert bridge.hub.board("sim2") is None
            assert not col.with_prefix(TEMP % b"sim2")
        lines = [ln for ln in _log(tmp_path, "sim2").splitlines() if "TLS link to" in ln]
        assert len(lines) == 1, lines  # said once, however often it retried
        assert said in lines[0] and "gateway refused" in lines[0], lines[0]

    asyncio.run(run())


@pytest.mark.parametrize("required", [True, False])
def test_plaintext_board_refused_where_encryption_is_required(
        tmp_path: Path, pair: tuple[Path, Path], required: bool,
        caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with tls_bridge(tmp_path, pair, [{}, {"tls": 0}],
                              board_links_require_encryption=required) as (bridge, urls):
            guard = bridge.link_guard
            assert guard is not None
            col = Collector(urls["sp_pub"][0], b"/pubmote/demo/")
            try:
                await boards_registered(bridge, ["sim1"])
                if required:
                    await wait_until(lambda: guard.counters["plaintext_refused"] >= 3, 40,
                                     "sim2's plaintext attempts to be refused")
                    assert bridge.hub.board("sim2") is None
                    assert "plaintext refused" in bridge.status()
                else:  # moving boards over: clear ones beside TLS ones
                    await boards_registered(bridge, ["sim2"])
                    assert guard.counters["plaintext_accepted"] >= 1
                await _still_served(col)
            finally:
                col.close()

    with caplog.at_level(logging.WARNING, logger="pubmote.faces"):
        asyncio.run(run())
    refused = [r for r in caplog.records if "without TLS" in r.getMessage()]
    assert len(refused) == (1 if required else 0), [r.getMessage() for r in refused]


def _attacks(seed: int) -> list[bytes | None]:
    """What an attacker sends to the TLS port: random bytes (every first byte kind),
    TLS-looking records with junk, a record header promising more than comes, a flood
    after a handshake byte; None: connect and say nothing."""
    rnd = random.Random(seed)
    out: list[bytes | None] = [None, b"\x16", b"\x16\x03\x01\xff\xff" + bytes(200_000)]
    for first in (0x00, 0x16, 0x17, 0x15, 0x80, 0xFF, 0x47):
        out.append(bytes([first]) + rnd.randbytes(rnd.randrange(0, 5000)))
    for _ in range(6):
        body = rnd.randbytes(rnd.randrange(1, 600))
        out.append(b"\x16\x03" + bytes([rnd.randrange(0, 5)]) + len(body).to_bytes(2, "big")
                   + body)
    return out


async def _attack(port: int, payload: bytes | None) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        if payload:
            w.write(payload)
            with contextlib.suppress(ConnectionError):
                await w.drain()
        with contextlib.suppress(ConnectionError):
            async with asyncio.timeout(30):
                while await r.read(4096):  # until the bridge hangs up
                    pass
    finally:
        w.close()


def test_handshake_garbage_is_contained_and_counted(tmp_path: Path,
                                                    pair: tuple[Path, Path]) -> None:
    attacks = _attacks(28)

    async def run() -> None:
        errors: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: errors.append(ctx))
        async with tls_bridge(tmp_path, pair, [{}]) as (bridge, urls):
            guard = bridge.link_guard
            assert guard is not None
            guard.handshake_timeout_s = 2.0  # the stalled ones end sooner than a board's
            port = int(bridge.cfg["tcp"][0].rsplit(":", 1)[1])
            col = Collector(urls["sp_pub"][0], b"/pubmote/demo/")
            try:
                await boards_registered(bridge, ["sim1"])
                before = dict(guard.counters)
                for i in range(0, len(attacks), 6):  # six at a time, during traffic
                    await asyncio.gather(*(_attack(port, a) for a in attacks[i:i + 6]))
                # and a TLS client that does not trust this gateway hangs up mid-handshake
                other = ssl.create_default_context(cafile=str(_other_cert(tmp_path)[0]))
                with pytest.raises(ssl.SSLError):
                    await asyncio.open_connection("127.0.0.1", port, ssl=other,
                                                  server_hostname="pubmote-gateway")
                await wait_until(
                    lambda: guard.counters["tls_failed"] + guard.counters["plaintext_refused"]
                    - before["tls_failed"] - before["plaintext_refused"] >= len(attacks) + 1,
                    20, "every attack to be counted")
                assert guard.counters["tls_handshakes"] == before["tls_handshakes"]
                await _still_served(col)
            finally:
                col.close()
            assert [b.name for b in bridge.hub.board_infos()] == ["sim1"]
            assert bridge.hub.board("sim1").up
        assert errors == []  # nothing reached the loop's exception handler

    asyncio.run(run())


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_tls_key_others_can_read_stops_the_start(tmp_path: Path, pair: tuple[Path, Path],
                                                 mode: int) -> None:
    port = free_port()

    async def run() -> None:
        os.chmod(pair[1], mode)
        with pytest.raises(CertError) as e:
            async with tls_bridge(tmp_path, pair, [{}], tcp=["127.0.0.1:%d" % port]):
                pass
        assert "chmod 600 %s" % pair[1] in str(e.value)
        with socket.socket() as s:  # nothing was left bound
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
        os.chmod(pair[1], 0o600)  # once fixed, the same configuration serves its board
        async with tls_bridge(tmp_path, pair, [{}], tcp=["127.0.0.1:%d" % port]) as (bridge, _):
            await boards_registered(bridge, ["sim1"])

    asyncio.run(run())


def test_udp_faces_refused_where_encryption_is_required(
        tmp_path: Path, pair: tuple[Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pubmote.core import addresses

    # loopback taken for the network (nothing here binds beyond it): the face's exposure
    # line is what a gateway on a LAN would log
    monkeypatch.setattr(addresses, "is_loopback", lambda host: False)
    udp_port = free_port()
    udp_board = {"link": "udp", "host": "127.0.0.1", "port": udp_port, "tls": 0}

    async def run() -> None:
        with pytest.raises(ValueError, match="--udp 127.0.0.1:%d" % udp_port):
            async with tls_bridge(tmp_path, pair, [{}], udp=["127.0.0.1:%d" % udp_port]):
                pass
        with socket.socket(type=socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", udp_port))  # refused before anything was bound
        # said explicitly: UDP boards beside TLS ones, in clear, and the log says so
        # (its SP SUB endpoint, "exposed" too, given the allow-lists that then needs)
        async with tls_bridge(tmp_path, pair, [{}, udp_board], udp=["127.0.0.1:%d" % udp_port],
                              board_links_require_encryption=False,
                              sp_sub_allow_from=["127.0.0.1"],
                              sp_sub_allow_topics=["/pubmote"]) as (bridge, _):
            await boards_registered(bridge, ["sim1", "sim2"])
            assert bridge.hub.board("sim2").face_kind == "udp"

    with caplog.at_level(logging.WARNING, logger="pubmote.bridge"):
        asyncio.run(run())
    assert any("UDP face" in r.getMessage() and "not encrypted" in r.getMessage()
               and "boards must sign their registration" in r.getMessage()
               for r in caplog.records)
