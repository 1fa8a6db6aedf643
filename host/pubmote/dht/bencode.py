"""Strict bencode (BEP 3) for the DHT: canonical input only, bounded depth and size.

Canonical means one spelling per value: dict keys are byte strings in strictly increasing
order, integers have no leading zeros and no "-0", string lengths have no leading zeros.
Because of that, re-encoding a decoded value gives back the very bytes that were signed
(BEP 44 signs the bencoded `v`), so a decoded item can be checked without keeping spans.
Only `BencodeError` leaves `decode`, whatever the input bytes.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32  # KRPC nests 3-4 levels; a BEP 44 `v` may nest more, but not without end
MAX_INPUT = 64 * 1024  # larger than any UDP datagram the DHT sends
MAX_ITEMS = 4096  # total list entries + dict pairs in one message

Value = int | bytes | list[Any] | dict[bytes, Any]


class BencodeError(ValueError):
    """Malformed or non-canonical bencode, or a value that cannot be encoded."""


def encode(obj: Any) -> bytes:
    """Bencode obj: int, bytes/bytearray/memoryview, str (UTF-8), list/tuple, dict.

    Dict keys may be bytes or str; they are sorted as raw byte strings.
    """
    out = bytearray()
    _encode(obj, out, 0)
    return bytes(out)


def _encode(obj: Any, out: bytearray, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BencodeError("nesting deeper than %d" % MAX_DEPTH)
    if isinstance(obj, bool):  # bool is an int subclass; refusing it catches mistakes
        raise BencodeError("cannot bencode bool")
    if isinstance(obj, int):
        out += b"i%de" % obj
    elif isinstance(obj, bytes | bytearray | memoryview):
        b = bytes(obj)
        out += b"%d:" % len(b)
        out += b
    elif isinstance(obj, str):
        b = obj.encode()
        out += b"%d:" % len(b)
        out += b
    elif isinstance(obj, list | tuple):
        out += b"l"
        for x in obj:
            _encode(x, out, depth + 1)
        out += b"e"
    elif isinstance(obj, dict):
        items: list[tuple[bytes, Any]] = []
        for key, v in obj.items():
            k = key.encode() if isinstance(key, str) else key
            if not isinstance(k, bytes):
                raise BencodeError("dict key must be bytes or str, not %s" % type(k).__name__)
            items.append((k, v))
        items.sort(key=lambda kv: kv[0])
        out += b"d"
        prev: bytes | None = None
        for k, v in items:
            if k == prev:
                raise BencodeError("duplicate dict key %r" % k)
            prev = k
            out += b"%d:" % len(k)
            out += k
            _encode(v, out, depth + 1)
        out += b"e"
    else:
        raise BencodeError("cannot bencode %s" % type(obj).__name__)


class _Decoder:
    __slots__ = ("data", "pos", "items", "max_depth", "max_items")

    def __init__(self, data: bytes, max_depth: int, max_items: int) -> None:
        self.data = data
        self.pos = 0
        self.items = 0
        self.max_depth = max_depth
        self.max_items = max_items

    def fail(self, why: str) -> BencodeError:
        return BencodeError("%s at byte %d" % (why, self.pos))

    def value(self, depth: int) -> Any:
        data = self.data
        if self.pos >= len(data):
            raise self.fail("truncated")
        c = data[self.pos]
        if c == 0x69:  # i
            return self.integer()
        if 0x30 <= c <= 0x39:
            return self.string()
        if c == 0x6C or c == 0x64:  # l, d
            if depth >= self.max_depth:
                raise self.fail("nesting deeper than %d" % self.max_depth)
            self.pos += 1
            if c == 0x6C:
                return self.list_(depth)
            return self.dict_(depth)
        raise self.fail("unexpected byte 0x%02x" % c)

    def _count(self) -> None:
        self.items += 1
        if self.items > self.max_items:
            raise self.fail("more than %d items" % self.max_items)

    def integer(self) -> int:
        data = self.data
        end = data.find(b"e", self.pos + 1)
        if end < 0:
            raise self.fail("unterminated integer")
        digits = data[self.pos + 1:end]
        neg = digits[:1] == b"-"
        body = digits[1:] if neg else digits
        if not body or not body.isdigit() or len(body) > 20:
            raise self.fail("bad integer")
        if body[:1] == b"0" and (len(body) > 1 or neg):
            raise self.fail("non-canonical integer")
        self.pos = end + 1
        n = int(body)
        return -n if neg else n

    def string(self) -> bytes:
        data = self.data
        colon = data.find(b":", self.pos, self.pos + 12)
        if colon < 0:
            raise self.fail("bad string length")
        digits = data[self.pos:colon]
        if not digits.isdigit() or (digits[:1] == b"0" and len(digits) > 1):
            raise self.fail("non-canonical string length")
        n = int(digits)
        start = colon + 1
        if n > len(data) - start:  # checked before any slice is taken
            raise self.fail("string longer than the input")
        self.pos = start + n
        return data[start:start + n]

    def list_(self, depth: int) -> list[Any]:
        out: list[Any] = []
        data = self.data
        while True:
            if self.pos >= len(data):
                raise self.fail("unterminated list")
            if data[self.pos] == 0x65:  # e
                self.pos += 1
                return out
            self._count()
            out.append(self.value(depth + 1))

    def dict_(self, depth: int) -> dict[bytes, Any]:
        out: dict[bytes, Any] = {}
        data = self.data
        prev: bytes | None = None
        while True:
            if self.pos >= len(data):
                raise self.fail("unterminated dict")
            c = data[self.pos]
            if c == 0x65:
                self.pos += 1
                return out
            if not 0x30 <= c <= 0x39:
                raise self.fail("dict key is not a string")
            self._count()
            k = self.string()
            if prev is not None and k <= prev:
                raise self.fail("dict keys unsorted or duplicated")
            prev = k
            out[k] = self.value(depth + 1)


def decode(data: bytes | bytearray | memoryview, *, max_depth: int = MAX_DEPTH,
           max_items: int = MAX_ITEMS, max_len: int = MAX_INPUT) -> Any:
    """Decode exactly one canonical bencoded value filling all of data.

    Strings come back as bytes, dict keys as bytes. Raises BencodeError on anything else.
    """
    b = bytes(data)
    if len(b) > max_len:
        raise BencodeError("input of %d bytes exceeds %d" % (len(b), max_len))
    d = _Decoder(b, max_depth, max_items)
    v = d.value(0)
    if d.pos != len(b):
        raise d.fail("trailing bytes")
    return v
