"""The TLS gate of the --tcp board face (pubmote.faces.tls): what the first byte decides,
the handshake over memory BIOs, the counters and the log-once, the bounds (handshake time,
unread ciphertext), with CPython's ssl as the board and a recording face behind the gate."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pubmote.core.tlscert import CertError, make_gateway_cert
from pubmote.faces.tls import BoardPort, LinkGuard, server_context


class RecordingFace(asyncio.Protocol):
    """What the StreamFace would see: the transport it is given and the bytes."""

    def __init__(self, faces: list[RecordingFace]) -> None:
        self.transport: asyncio.Transport | None = None
        self.data = b""
        self.lost = False
        faces.append(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data
        if self.data.endswith(b"ping") and self.transport is not None:
            self.transport.write(b"pong")

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_gateway_cert(tmp_path_factory.mktemp("tls"))


def client_ctx(cert: Path, name: str = "pubmote-gateway") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = True
    return ctx


@contextlib.asynccontextmanager
async def gate(pair: tuple[Path, Path], require: bool, timeout_s: float = 20.0
               ) -> AsyncIterator[tuple[LinkGuard, list[RecordingFace], int]]:
    guard = LinkGuard(server_context(str(pair[0]), str(pair[1])), require, timeout_s)
    faces: list[RecordingFace] = []
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: BoardPort(guard, lambda: RecordingFace(faces)),
                                   "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield guard, faces, port
    finally:
        srv.close()
        await srv.wait_closed()


async def _until(pred: object, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not pred():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def _closed_by_peer(r: asyncio.StreamReader, timeout_s: float = 10.0) -> bool:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        async with asyncio.timeout(timeout_s):
            while await r.read(4096):
                pass
    return True


def test_tls_board_gets_a_face_over_the_decrypted_stream(pair: tuple[Path, Path]) -> None:
    async def run() -> None:
        async with gate(pair, require=True) as (guard, faces, port):
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx(pair[0]),
                                                 server_hostname="pubmote-gateway")
            w.write(b"\x00ping")
            await w.drain()
            assert await asyncio.wait_for(r.readexactly(4), 10) == b"pong"
            assert guard.counters["tls_handshakes"] == 1
            assert guard.ctx is not None
            assert guard.ctx.minimum_version == ssl.TLSVersion.TLSv1_2
            face = faces[0]
            assert face.data == b"\x00ping"
            assert face.transport is not None
            assert face.transport.get_extra_info("ssl_object") is not None
            assert face.transport.get_extra_info("peername")[0] == "127.0.0.1"
            face.transport.close()  # the bridge closes the face: the board sees the end
            assert await _closed_by_peer(r)
            await _until(lambda: face.lost)
            w.close()

    asyncio.run(run())


@pytest.mark.parametrize("first", [0x00, 0x01, 0x15, 0x17, 0x47, 0x80, 0xFF])
def test_anything_but_a_handshake_is_refused_and_counted(pair: tuple[Path, Path],
                                                         first: int) -> None:
    async def run() -> None:
        async with gate(pair, require=True) as (guard, faces, port):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(bytes([first]) + os.urandom(200))
            await w.drain()
            assert await _closed_by_peer(r)
            what = "plaintext_refused" if first == 0 else "tls_failed"
            await _until(lambda: guard.counters[what] == 1)
            assert sum(guard.counters.values()) == 1
            assert faces == []  # nothing reached a face
            w.close()

    asyncio.run(run())


def test_plaintext_accepted_beside_tls_when_not_required(pair: tuple[Path, Path]) -> None:
    async def run() -> None:
        async with gate(pair, require=False) as (guard, faces, port):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"\x00ping")
            await w.drain()
            assert await asyncio.wait_for(r.readexactly(4), 10) == b"pong"
            r2, w2 = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx(pair[0]),
                                                   server_hostname="pubmote-gateway")
            w2.write(b"ping")
            await w2.drain()
            assert await asyncio.wait_for(r2.readexactly(4), 10) == b"pong"
            assert guard.counters["plaintext_accepted"] == 1
            assert guard.counters["tls_handshakes"] == 1
            assert [f.data for f in faces] == [b"\x00ping", b"ping"]
            w.close()
            w2.close()

    asyncio.run(run())


def test_refusals_are_logged_once_per_address(pair: tuple[Path, Path],
                                              caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with gate(pair, require=True) as (guard, _, port):
            for _ in range(5):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"\x00plain")
                await w.drain()
                assert await _closed_by_peer(r)
                w.close()
            await _until(lambda: guard.counters["plaintext_refused"] == 5)

    with caplog.at_level(logging.WARNING, logger="pubmote.faces"):
        asyncio.run(run())
    lines = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1 and "127.0.0.1" in lines[0].getMessage()


def test_a_silent_connection_is_dropped_at_the_handshake_deadline(
        pair: tuple[Path, Path]) -> None:
    async def run() -> None:
        async with gate(pair, require=True, timeout_s=0.5) as (guard, _, port):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            assert await _closed_by_peer(r)
            assert guard.counters["tls_failed"] == 1
            # a handshake started and never finished: the same deadline
            r, w2 = await asyncio.open_connection("127.0.0.1", port)
            w2.write(b"\x16\x03\x01\x00\x10")  # a record header promising 16 bytes
            await w2.drain()
            assert await _closed_by_peer(r)
            assert guard.counters["tls_failed"] == 2
            w.close()
            w2.close()

    asyncio.run(run())


def test_a_client_that_does_not_trust_the_gateway_is_counted(pair: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    other, _ = make_gateway_cert(tmp_path)

    async def run() -> None:
        async with gate(pair, require=True) as (guard, faces, port):
            with pytest.raises(ssl.SSLError):
                await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx(other),
                                              server_hostname="pubmote-gateway")
            await _until(lambda: guard.counters["tls_failed"] == 1)
            assert faces == []

    asyncio.run(run())


def test_key_file_readable_by_others_is_refused(pair: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = make_gateway_cert(tmp_path)
    for bit in (0o040, 0o020, 0o010, 0o004, 0o002, 0o001):
        os.chmod(key, 0o600 | bit)
        with pytest.raises(CertError) as e:
            server_context(str(cert), str(key))
        assert "chmod 600 %s" % key in str(e.value)
        assert "\n" not in str(e.value)
    os.chmod(key, 0o600)
    assert server_context(str(cert), str(key)) is not None
    with pytest.raises(CertError):  # a key that is not the certificate's
        server_context(str(pair[0]), str(key))
