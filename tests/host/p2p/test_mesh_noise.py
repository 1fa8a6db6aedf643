"""Noise XX with the libp2p payload: the state machine, transport framing, and a host
facing handshake garbage, bad signatures, wrong PeerIds, short and oversize frames."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Coroutine
from typing import Any

import pytest
from mesh_util import addr_of, make_host, raw_secured, raw_tcp

from e2e import wait_until
from pubmote.p2p import DialError, KeyPair, multistream, noise
from pubmote.p2p.codec import pb_bytes
from pubmote.p2p.errors import HandshakeError, ProtocolError
from pubmote.p2p.noise import MAX_FRAME, MAX_PLAINTEXT, HandshakeState
from pubmote.p2p.transport import RawConn

LOGGER = "pubmote.p2p"


def run(coro: Coroutine[Any, Any, None], timeout_s: float = 20.0) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout_s))


def handshake_pair() -> tuple[HandshakeState, HandshakeState, bytes, bytes]:
    i, r = HandshakeState(True), HandshakeState(False)
    r.read_message(i.write_message(b""))
    p2 = i.read_message(r.write_message(b"responder payload"))
    p3 = r.read_message(i.write_message(b"initiator payload"))
    return i, r, p2, p3


def test_xx_handshake_agrees() -> None:
    i, r, p2, p3 = handshake_pair()
    assert (p2, p3) == (b"responder payload", b"initiator payload")
    assert i.h == r.h and i.rs == r.s_pub and r.rs == i.s_pub
    i_send, i_recv = i.split()
    r_send, r_recv = r.split()
    for n in range(3):
        msg = b"frame %d" % n
        assert r_recv.decrypt(b"", i_send.encrypt(b"", msg)) == msg
        assert i_recv.decrypt(b"", r_send.encrypt(b"", msg)) == msg


def test_xx_message_sizes() -> None:
    i, r = HandshakeState(True), HandshakeState(False)
    m1 = i.write_message(b"")
    assert len(m1) == 32
    r.read_message(m1)
    m2 = r.write_message(b"")
    assert len(m2) == 32 + 48 + 16     # e, encrypted s, empty payload's tag
    i.read_message(m2)
    assert len(i.write_message(b"")) == 48 + 16


def test_tampered_handshake_is_rejected() -> None:
    i, r = HandshakeState(True), HandshakeState(False)
    r.read_message(i.write_message(b""))
    m2 = bytearray(r.write_message(b"payload"))
    m2[40] ^= 1
    with pytest.raises(HandshakeError):
        i.read_message(bytes(m2))


def test_replayed_transport_frame_fails() -> None:
    i, r, _, _ = handshake_pair()
    send, _ = i.split()
    _, recv = r.split()
    ct = send.encrypt(b"", b"hello")
    assert recv.decrypt(b"", ct) == b"hello"
    with pytest.raises(ProtocolError):
        recv.decrypt(b"", ct)   # the nonce moved on


def test_payload_checks() -> None:
    me = KeyPair.generate()
    static = os.urandom(32)
    payload = noise.make_payload(me, static)
    peer, key = noise.verify_payload(payload, static, me.peer_id)
    assert peer == me.peer_id and key == me.public
    with pytest.raises(HandshakeError, match="signature"):
        noise.verify_payload(payload, os.urandom(32), None)     # signed another static key
    with pytest.raises(HandshakeError, match="expected"):
        noise.verify_payload(payload, static, KeyPair.generate().peer_id)
    other = KeyPair.generate()
    forged = pb_bytes(1, me.public.encode()) + pb_bytes(2, other.sign(b"noise-libp2p-static-key:"
                                                                      + static))
    with pytest.raises(HandshakeError, match="signature"):
        noise.verify_payload(forged, static, None)
    for junk in (b"", b"\xff\xff", pb_bytes(1, b"\x08\x01"), pb_bytes(2, b"sig")):
        with pytest.raises(HandshakeError):
            noise.verify_payload(junk, static, None)


def test_large_writes_are_split_into_max_size_frames() -> None:
    """A session made as the host makes one (a TCP connection, the handshake's cipher
    states) writes 200 kB as frames of at most MAX_FRAME bytes; the peer reads them off the
    socket and decrypts them back to the data."""
    async def go() -> None:
        i, r, _, _ = handshake_pair()
        send, i_recv = i.split()
        _, recv = r.split()  # the peer's
        accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = \
            asyncio.Queue()

        async def on_conn(rd: asyncio.StreamReader, wr: asyncio.StreamWriter) -> None:
            await accepted.put((rd, wr))

        server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        peer_reader, peer_writer = await accepted.get()
        other = KeyPair.generate()
        sess = noise.NoiseSession(RawConn(reader, writer), send, i_recv, other.peer_id,
                                  other.public)
        data = os.urandom(200_000)
        sess.write_nowait(data)
        out = b""
        while len(out) < len(data):
            (n,) = struct.unpack(">H", await peer_reader.readexactly(2))
            assert n <= MAX_FRAME
            out += recv.decrypt(b"", await peer_reader.readexactly(n))
        assert out == data and MAX_PLAINTEXT + 16 == MAX_FRAME
        for w in (writer, peer_writer):
            w.close()
        server.close()
        await server.wait_closed()

    run(go())


def _assert_logged(caplog: pytest.LogCaptureFixture, *words: str) -> None:
    msgs = [r.getMessage() for r in caplog.records]
    assert any(all(w in m for w in words) for m in msgs), msgs


async def _garbage_then_eof(payload: bytes, **cfg: object) -> int:
    """Send `payload` on a fresh TCP connection; return how many handshakes failed."""
    async with make_host(**cfg) as h:
        raw = await raw_tcp(h)
        await raw.write(payload)
        # the host hangs up on us (EOF), it does not crash
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            while True:
                await raw.readexactly(1)
        # and keeps serving: a real peer connects fine afterwards
        async with make_host() as other:
            await other.connect(addr_of(h))
            assert await other.ping(h.peer_id)
        return h.failed_handshakes


MS_NOISE = multistream.encode_message("/multistream/1.0.0") + multistream.encode_message("/noise")


@pytest.mark.parametrize("name,payload", [
    ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"x" * 100),
    ("random", os.urandom(300)),
    ("bad-header", b"\x10/multistream/9.9\n"),
    ("short-msg1", MS_NOISE + b"\x00\x05hello"),
    ("oversize-msg1", MS_NOISE + b"\xff\xff" + os.urandom(65535)),
])
def test_handshake_garbage_closes_with_logged_reason(name: str, payload: bytes,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        assert await _garbage_then_eof(payload, handshake_timeout_s=1.0) == 1

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "inbound handshake", "failed")


def test_stalled_handshake_times_out(caplog: pytest.LogCaptureFixture) -> None:
    # claims a 65535-byte message and sends 10 bytes of it
    async def go() -> None:
        assert await _garbage_then_eof(MS_NOISE + b"\xff\xff" + bytes(10),
                                       handshake_timeout_s=0.5) == 1

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "inbound handshake", "timed out")


def test_bad_signature_from_dialer(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host() as h:
            raw = await raw_tcp(h)
            await multistream.select(raw, ["/noise"])
            hs = HandshakeState(True)
            msg1 = hs.write_message(b"")
            await raw.write(struct.pack(">H", len(msg1)) + msg1)
            (n,) = struct.unpack(">H", await raw.readexactly(2))
            hs.read_message(await raw.readexactly(n))
            me, other = KeyPair.generate(), KeyPair.generate()
            forged = pb_bytes(1, me.public.encode()) + pb_bytes(
                2, other.sign(b"noise-libp2p-static-key:" + hs.s_pub))
            msg3 = hs.write_message(forged)
            await raw.write(struct.pack(">H", len(msg3)) + msg3)
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await raw.readexactly(1)
            assert h.failed_handshakes == 1 and h.connected_peers() == []

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "inbound handshake", "signature")


def test_wrong_peer_id_when_dialing(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host() as a, make_host() as b:
            wrong = str(b.listen_addrs[0].with_p2p(str(KeyPair.generate().peer_id)))
            with pytest.raises(DialError, match="expected"):
                await a.connect(wrong)
            assert a.connected_peers() == [] and b.connected_peers() == []
            # and the right one works
            await a.connect(addr_of(b))

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "dial", "expected")


@pytest.mark.parametrize("name,frame", [
    ("bad-tag", b"\xff\xff" + os.urandom(65535)),        # the largest frame, undecryptable
    ("shorter-than-tag", b"\x00\x05" + b"12345"),
    ("empty", b"\x00\x00"),
])
def test_bad_transport_frames_close_the_connection(name: str, frame: bytes,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host(identify_on_connect=False) as h:
            sec = await raw_secured(h)
            await wait_until(lambda: len(h.connected_peers()) == 1, 10, "the connection")
            await sec.raw.write(frame)
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                while True:
                    await sec.raw.readexactly(1)
            await wait_until(lambda: h.connected_peers() == [], 10, "the host to hang up")

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "closing connection", "protocol error")


MS_HEADER = multistream.encode_message("/multistream/1.0.0")


@pytest.mark.parametrize("name,answer,reason", [
    ("garbage", b"\x05hello", "newline"),
    ("http", b"HTTP/1.1 400 Bad Request\r\n\r\n", "timed out"),   # reads as a 72-byte message
    ("na", MS_HEADER + multistream.encode_message("na"), "supports none"),
    ("msg2-garbage", MS_HEADER + multistream.encode_message("/noise")
     + b"\x00\x60" + os.urandom(96), "decryption failed"),
    ("msg2-short", MS_HEADER + multistream.encode_message("/noise") + b"\x00\x10" + bytes(16),
     "second message"),
    ("silent", b"", "timed out"),
])
def test_dialing_a_listener_that_answers_garbage(name: str, answer: bytes, reason: str) -> None:
    async def go() -> None:
        stop = asyncio.Event()

        async def fake(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(answer)
            await stop.wait()
            w.close()

        server = await asyncio.start_server(fake, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with make_host() as h:
                addr = "/ip4/127.0.0.1/tcp/%d/p2p/%s" % (port, KeyPair.generate().peer_id)
                with pytest.raises(DialError, match=reason):
                    await h.connect(addr, timeout_s=3.0)  # an answer, under load too
                assert h.connected_peers() == []
        finally:
            stop.set()
            server.close()
            await asyncio.sleep(0.01)

    run(go())
