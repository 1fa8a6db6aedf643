"""multistream-select 1.0: agree on a protocol over a fresh byte stream.

Every message is a varint length, then the text, then a newline (counted in the length).
The dialer sends the header and its first proposal in one write; the listener answers
each proposal with an echo (accepted) or `na`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pubmote.p2p.codec import encode_uvarint
from pubmote.p2p.errors import NegotiationError, ProtocolError

PROTOCOL_ID = "/multistream/1.0.0"
NA = "na"
_MAX_MESSAGE = 1024        # a protocol id is short; anything longer is garbage
_MAX_PROPOSALS = 16        # a listener stops answering after this many `na`s


class ByteStream(Protocol):
    """What multistream-select runs over: a TCP RawConn, a Noise session or a Yamux stream."""

    async def readexactly(self, n: int) -> bytes: ...

    async def write(self, data: bytes) -> None: ...


def encode_message(text: str) -> bytes:
    body = text.encode() + b"\n"
    return encode_uvarint(len(body)) + body


async def read_message(stream: ByteStream) -> str:
    """Read one message; ProtocolError for garbage (bad varint, oversize, no newline)."""
    length = 0
    shift = 0
    for _ in range(3):  # 3 varint bytes cover _MAX_MESSAGE
        b = (await stream.readexactly(1))[0]
        length |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    else:
        raise ProtocolError("multistream: length varint too long")
    if length == 0 or length > _MAX_MESSAGE:
        raise ProtocolError("multistream: message length %d" % length)
    body = await stream.readexactly(length)
    if body[-1:] != b"\n":
        raise ProtocolError("multistream: message without trailing newline")
    try:
        return body[:-1].decode()
    except UnicodeDecodeError:
        raise ProtocolError("multistream: message is not UTF-8") from None


async def select(stream: ByteStream, protocols: list[str]) -> str:
    """Dialer side: propose `protocols` in order; return the one the listener accepted.

    Raises NegotiationError when it accepts none, ProtocolError on garbage.
    """
    if not protocols:
        raise ValueError("no protocols to propose")
    await stream.write(encode_message(PROTOCOL_ID) + encode_message(protocols[0]))
    header = await read_message(stream)
    if header != PROTOCOL_ID:
        raise ProtocolError("multistream: unexpected header %r" % header[:64])
    for i, proto in enumerate(protocols):
        if i > 0:
            await stream.write(encode_message(proto))
        answer = await read_message(stream)
        if answer == proto:
            return proto
        if answer != NA:
            raise ProtocolError("multistream: unexpected answer %r to %r" % (answer[:64], proto))
    raise NegotiationError("remote supports none of %s" % ", ".join(protocols))


async def handle(stream: ByteStream, supports: Callable[[str], bool]) -> str:
    """Listener side: answer proposals until one is supported; return it.

    Raises NegotiationError after too many unsupported proposals, ProtocolError on garbage.
    """
    # Our header goes out at once; it does not depend on what the dialer says.
    await stream.write(encode_message(PROTOCOL_ID))
    header = await read_message(stream)
    if header != PROTOCOL_ID:
        raise ProtocolError("multistream: unexpected header %r" % header[:64])
    for _ in range(_MAX_PROPOSALS):
        proto = await read_message(stream)
        if proto != "ls" and supports(proto):
            await stream.write(encode_message(proto))
            return proto
        await stream.write(encode_message(NA))
    raise NegotiationError("multistream: gave up after %d unsupported proposals"
                           % _MAX_PROPOSALS)
