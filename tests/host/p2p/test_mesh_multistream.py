"""multistream-select 1.0: exact bytes, dialer and listener, `na`, and garbage."""

from __future__ import annotations

import asyncio

import pytest

from pubmote.p2p import multistream
from pubmote.p2p.errors import NegotiationError, ProtocolError


class Pipe:
    """One end of an in-memory duplex byte stream."""

    def __init__(self, rx: asyncio.StreamReader, tx: asyncio.StreamReader) -> None:
        self.rx = rx
        self.tx = tx
        self.sent = b""

    async def readexactly(self, n: int) -> bytes:
        return await self.rx.readexactly(n)

    async def write(self, data: bytes) -> None:
        self.sent += data
        self.tx.feed_data(data)

    def close(self) -> None:
        self.tx.feed_eof()


def pipe_pair() -> tuple[Pipe, Pipe]:
    a, b = asyncio.StreamReader(), asyncio.StreamReader()
    return Pipe(a, b), Pipe(b, a)


def test_message_bytes() -> None:
    assert multistream.encode_message("/multistream/1.0.0") == b"\x13/multistream/1.0.0\n"
    assert multistream.encode_message("na") == b"\x03na\n"
    assert multistream.encode_message("x" * 200)[:2] == bytes((0xC9, 0x01))


def test_select_and_handle() -> None:
    async def go() -> None:
        d, li = pipe_pair()
        chosen, answered = await asyncio.gather(
            multistream.select(d, ["/yamux/2.0.0", "/yamux/1.0.0"]),
            multistream.handle(li, lambda p: p == "/yamux/1.0.0"))
        assert chosen
        assert chosen == answered == "/yamux/1.0.0"
        # the dialer pipelines its header and first proposal in one write
        assert d.sent.startswith(b"\x13/multistream/1.0.0\n\x0d/yamux/2.0.0\n")
        assert b"\x03na\n" in li.sent

    asyncio.run(go())


def test_select_none_supported() -> None:
    async def go() -> None:
        d, li = pipe_pair()
        listener = asyncio.ensure_future(multistream.handle(li, lambda p: False))
        with pytest.raises(NegotiationError):
            await asyncio.wait_for(multistream.select(d, ["/a", "/b"]), 5)
        d.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(listener, 5)

    asyncio.run(go())


def test_listener_gives_up_after_many_proposals() -> None:
    async def go() -> None:
        d, li = pipe_pair()
        dialer = asyncio.ensure_future(multistream.select(d, ["/p%d" % i for i in range(40)]))
        with pytest.raises(NegotiationError):
            await asyncio.wait_for(multistream.handle(li, lambda p: False), 5)
        li.close()  # the host resets the stream at this point
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(dialer, 5)

    asyncio.run(go())


HEADER = b"\x13/multistream/1.0.0\n"


@pytest.mark.parametrize("garbage", [
    b"\x00",                             # empty message
    b"\xff\xff\xff\x01",                 # varint too long
    b"\xf0\x7f" + b"x" * 10,             # claims 16368 bytes
    b"\x05hello",                        # no newline
    b"\x04\xff\xfe\xfd\n",               # not UTF-8
    b"\x06/http\n",                      # wrong header
    b"\x13/multistream/1.0.0\n\x00",  # good header, then an empty proposal
])
def test_garbage_is_a_protocol_error(garbage: bytes) -> None:
    async def go() -> None:
        d, li = pipe_pair()
        await d.write(garbage)
        with pytest.raises(ProtocolError):
            await asyncio.wait_for(multistream.handle(li, lambda p: True), 5)
        d2, li2 = pipe_pair()
        await li2.write(garbage)
        with pytest.raises(ProtocolError):
            await asyncio.wait_for(multistream.select(d2, ["/x"]), 5)

    asyncio.run(go())


def test_truncated_message_then_eof() -> None:
    # "GET / ..." reads as a 71-byte message: the parser waits for it; EOF ends the wait
    # (on a live socket the host's handshake timeout does).
    async def go() -> None:
        d, li = pipe_pair()
        await d.write(b"GET / HTTP/1.1\r\n\r\n")
        d.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(multistream.handle(li, lambda p: True), 5)

    asyncio.run(go())


def test_answer_that_is_neither_echo_nor_na() -> None:
    async def go() -> None:
        d, li = pipe_pair()
        await li.write(HEADER + multistream.encode_message("/other"))
        with pytest.raises(ProtocolError):
            await multistream.select(d, ["/x"])

    asyncio.run(go())
