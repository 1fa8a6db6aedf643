# NDN TLV primitives: var-numbers, NonNegativeIntegers and a cursor over TLV elements.
# Every reader takes (buf, off) and never trusts a length: a length that runs past the
# end of the input is a DecodeError before anything is allocated for it.
from .compat import const
from .errors import DecodeError, EncodeError

_U8 = const(0xFD)
_U16 = const(0xFE)
_MAX_U16 = const(0xFFFF)


def varnum_size(n):
    """Bytes a var-number takes: 1, 3, 5 or 9."""
    if n < 0xFD:
        return 1
    if n <= 0xFFFF:
        return 3
    if n <= 0xFFFFFFFF:
        return 5
    if n <= 0xFFFFFFFFFFFFFFFF:
        return 9
    raise EncodeError("too large")


def write_varnum(buf, off, n):
    """Write var-number n at buf[off]; return the bytes written."""
    if n < 0xFD:
        buf[off] = n
        return 1
    if n <= _MAX_U16:
        buf[off] = _U8
        buf[off + 1] = n >> 8
        buf[off + 2] = n & 0xFF
        return 3
    if n <= 0xFFFFFFFF:
        buf[off] = _U16
        _put_be(buf, off + 1, n, 4)
        return 5
    if n <= 0xFFFFFFFFFFFFFFFF:
        buf[off] = 0xFF
        _put_be(buf, off + 1, n, 8)
        return 9
    raise EncodeError("too large")


def _put_be(buf, off, n, width):
    i = off + width - 1
    while i >= off:
        buf[i] = n & 0xFF
        n >>= 8
        i -= 1


def _get_be(buf, off, width):
    n = 0
    end = off + width
    while off < end:
        n = (n << 8) | buf[off]
        off += 1
    return n


def read_varnum(buf, off, end=-1):
    """Read a var-number at buf[off] (not past end); return (value, size)."""
    if end < 0:
        end = len(buf)
    if off >= end:
        raise DecodeError("truncated")
    b = buf[off]
    if b < 0xFD:
        return b, 1
    width = 2 if b == 0xFD else (4 if b == 0xFE else 8)
    if off + 1 + width > end:
        raise DecodeError("truncated")
    return _get_be(buf, off + 1, width), 1 + width


def nonneg_size(n):
    """Bytes a NonNegativeInteger takes: 1, 2, 4 or 8."""
    if n < 0:
        raise EncodeError("negative")
    if n <= 0xFF:
        return 1
    if n <= 0xFFFF:
        return 2
    if n <= 0xFFFFFFFF:
        return 4
    if n <= 0xFFFFFFFFFFFFFFFF:
        return 8
    raise EncodeError("too large")


def write_nonneg(buf, off, n):
    """Write n as a NonNegativeInteger (no TL header); return the bytes written."""
    w = nonneg_size(n)
    _put_be(buf, off, n, w)
    return w


def read_nonneg(buf, off, length):
    """Read a NonNegativeInteger value of the given length (1, 2, 4 or 8)."""
    if length != 1 and length != 2 and length != 4 and length != 8:
        raise DecodeError("bad NonNegativeInteger")
    if off + length > len(buf):
        raise DecodeError("truncated")
    return _get_be(buf, off, length)


def tl_size(typ, length):
    """Bytes of a whole TLV element whose value is `length` bytes."""
    return varnum_size(typ) + varnum_size(length) + length


def write_tl(buf, off, typ, length):
    """Write a TLV type and length; return the bytes written."""
    n = write_varnum(buf, off, typ)
    return n + write_varnum(buf, off + n, length)


def write_tlv(buf, off, typ, value):
    """Write a whole TLV element with a bytes-like value; return the bytes written."""
    n = len(value)
    h = write_tl(buf, off, typ, n)
    buf[off + h : off + h + n] = value
    return h + n


def nonneg_tlv_size(typ, n):
    return tl_size(typ, nonneg_size(n))


def write_nonneg_tlv(buf, off, typ, n):
    """Write a TLV element holding NonNegativeInteger n; return the bytes written."""
    w = nonneg_size(n)
    h = write_tl(buf, off, typ, w)
    _put_be(buf, off + h, n, w)
    return h + w


def is_critical(typ):
    """NDN evolvability rule: types 0-31 and odd types are critical."""
    return typ <= 31 or (typ & 1) == 1


class TLVReader:
    """A cursor over consecutive TLV elements of buf[off:end].

    next() advances to the next element and sets typ, vstart and vend (the
    value is buf[vstart:vend]) without allocating; it returns False at end.
    """

    def __init__(self, buf, off=0, end=-1):
        self.buf = buf
        self.pos = off
        self.end = len(buf) if end < 0 else end
        if self.end > len(buf):
            raise DecodeError("truncated")
        self.typ = 0
        self.vstart = 0
        self.vend = 0

    def reset(self, buf, off=0, end=-1):
        self.buf = buf
        self.pos = off
        self.end = len(buf) if end < 0 else end
        if self.end > len(buf):
            raise DecodeError("truncated")

    def next(self):
        # Inline var-numbers (no (value, size) tuple): this runs for every element parsed.
        pos = self.pos
        end = self.end
        if pos >= end:
            return False
        buf = self.buf
        typ = buf[pos]
        pos += 1
        if typ >= 0xFD:
            w = 2 if typ == 0xFD else (4 if typ == 0xFE else 8)
            if pos + w > end:
                raise DecodeError("truncated")
            typ = _get_be(buf, pos, w)
            pos += w
        if pos >= end:
            raise DecodeError("truncated")
        length = buf[pos]
        pos += 1
        if length >= 0xFD:
            w = 2 if length == 0xFD else (4 if length == 0xFE else 8)
            if pos + w > end:
                raise DecodeError("truncated")
            length = _get_be(buf, pos, w)
            pos += w
        if length > end - pos:
            raise DecodeError("truncated")
        self.typ = typ
        self.vstart = pos
        self.vend = pos + length
        self.pos = pos + length
        return True

    def expect(self, typ):
        """Advance and require the next element to be of type typ."""
        if not self.next():
            raise DecodeError("unexpected TLV")
        if self.typ != typ:
            raise DecodeError("unexpected TLV")

    def length(self):
        return self.vend - self.vstart

    def value(self):
        """The current element's value as a memoryview (no copy)."""
        return memoryview(self.buf)[self.vstart : self.vend]

    def nonneg(self):
        return read_nonneg(self.buf, self.vstart, self.vend - self.vstart)

    def skip_unknown(self):
        """Call for an element the parser does not know: fails if it is critical."""
        if is_critical(self.typ):
            raise DecodeError("unknown critical TLV")


def read_tlv(buf, off=0, end=-1):
    """Read one TLV element at buf[off]: return (typ, vstart, vend)."""
    r = TLVReader(buf, off, end)
    if not r.next():
        raise DecodeError("truncated")
    return r.typ, r.vstart, r.vend
