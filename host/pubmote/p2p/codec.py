"""Small codecs the libp2p protocols share: unsigned varints, a protobuf subset, base58btc.

Parsers never trust a length: a claimed length beyond the input is a ProtocolError before
anything is allocated.
"""

from __future__ import annotations

from collections.abc import Iterator

from pubmote.p2p.errors import ProtocolError

_B58_ALPHABET = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58_ALPHABET)}

# Wire types of the protobuf encoding we use: varint and length-delimited.
WT_VARINT = 0
WT_I64 = 1
WT_LEN = 2
WT_I32 = 5


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned LEB128 varint."""
    if value < 0:
        raise ValueError("uvarint must be non-negative")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int]:
    """Decode a varint at `offset`; return (value, new offset). At most 9 bytes (63 bits)."""
    value = 0
    shift = 0
    end = len(buf)
    pos = offset
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            # Minimal encoding: a trailing zero byte would allow many spellings.
            if b == 0 and pos - offset > 1:
                raise ProtocolError("non-minimal varint")
            return value, pos
        shift += 7
        if shift >= 63:
            raise ProtocolError("varint too long")


# -- protobuf ---------------------------------------------------------------------------


def pb_varint(field: int, value: int) -> bytes:
    """One varint field."""
    return encode_uvarint(field << 3 | WT_VARINT) + encode_uvarint(value)


def pb_bytes(field: int, value: bytes | str) -> bytes:
    """One length-delimited field (bytes, string or an encoded sub-message)."""
    data = value.encode() if isinstance(value, str) else value
    return encode_uvarint(field << 3 | WT_LEN) + encode_uvarint(len(data)) + data


def pb_fields(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) for each field; bytes for LEN, int otherwise.

    Raises ProtocolError on malformed input (groups are not supported).
    """
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        key, pos = decode_uvarint(view, pos)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise ProtocolError("protobuf field number 0")
        if wt == WT_VARINT:
            value, pos = decode_uvarint(view, pos)
            yield field, wt, value
        elif wt == WT_LEN:
            n, pos = decode_uvarint(view, pos)
            if n > end - pos:
                raise ProtocolError("protobuf length %d beyond input" % n)
            yield field, wt, bytes(view[pos:pos + n])
            pos += n
        elif wt == WT_I64 or wt == WT_I32:
            n = 8 if wt == WT_I64 else 4
            if n > end - pos:
                raise ProtocolError("truncated fixed field")
            yield field, wt, int.from_bytes(view[pos:pos + n], "little")
            pos += n
        else:
            raise ProtocolError("unsupported protobuf wire type %d" % wt)


def pb_decode(buf: bytes | bytearray | memoryview, *,
              repeated: frozenset[int] = frozenset()) -> dict[int, object]:
    """Decode into {field: value}; fields in `repeated` collect into lists; last one wins
    otherwise (as protobuf says)."""
    out: dict[int, object] = {}
    for field, _wt, value in pb_fields(buf):
        if field in repeated:
            lst = out.setdefault(field, [])
            assert isinstance(lst, list)
            lst.append(value)
        else:
            out[field] = value
    return out


def pb_get_bytes(msg: dict[int, object], field: int) -> bytes | None:
    """A length-delimited field or None; ProtocolError if it has another wire type."""
    v = msg.get(field)
    if v is None:
        return None
    if not isinstance(v, bytes):
        raise ProtocolError("protobuf field %d: expected bytes" % field)
    return v


def pb_get_int(msg: dict[int, object], field: int) -> int | None:
    """A varint field or None."""
    v = msg.get(field)
    if v is None:
        return None
    if not isinstance(v, int):
        raise ProtocolError("protobuf field %d: expected varint" % field)
    return v


def pb_get_list(msg: dict[int, object], field: int) -> list[bytes]:
    """A repeated length-delimited field (decoded with `repeated=`)."""
    v = msg.get(field, [])
    if not isinstance(v, list) or not all(isinstance(x, bytes) for x in v):
        raise ProtocolError("protobuf field %d: expected repeated bytes" % field)
    return v


# -- base58btc --------------------------------------------------------------------------


def b58encode(data: bytes) -> str:
    """Base58btc (the Bitcoin alphabet), as PeerIds are printed."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    n = int.from_bytes(data, "big")
    out = bytearray()
    while n:
        n, r = divmod(n, 58)
        out.append(_B58_ALPHABET[r])
    out.extend(b"1" * zeros)
    out.reverse()
    return out.decode()


def b58decode(text: str) -> bytes:
    """Inverse of b58encode; ValueError on a character outside the alphabet."""
    if len(text) > 256:
        raise ValueError("base58 text too long")
    raw = text.encode()
    n = 0
    for c in raw:
        i = _B58_INDEX.get(c)
        if i is None:
            raise ValueError("invalid base58 character %r" % chr(c))
        n = n * 58 + i
    zeros = len(raw) - len(raw.lstrip(b"1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * zeros + body
