# A small CBOR (RFC 8949) subset for envelopes: ints (to 64 bits), bytes, text, arrays,
# maps, false/true/null and floats; definite lengths only, no tags.
# Encoding: ints in the shortest head (preferred serialisation); map keys sorted bytewise
# by their encoding (RFC 8949 4.2.1) so that CPython and MicroPython emit the same bytes.
# Floats, the same on every runtime (docs/protocols/cbor-floats.md): RFC 8949 4.2.2
# preferred serialisation, the shortest of half (3 bytes), single (5) and double (9) that
# holds the value exactly; every NaN as the half f97e00. A float32 value (all a
# single-precision board such as an RP2040 or ESP32 has) therefore travels as the same
# 5 or 3 bytes from every runtime, and only a value that needs a double is sent as one.
# Decoding accepts all three widths; a single-precision runtime keeps the nearest float32
# of a double (IEEE round-to-nearest-even; beyond float32's range: infinity).
# Nesting is limited to 16 levels; no length is trusted before the
# bytes exist (each item needs at least one byte, so a count is checked against them).
import struct

from .compat import const
from .errors import DecodeError, EncodeError

MAX_DEPTH = const(16)
_MAX_U64 = const(0xFFFFFFFFFFFFFFFF)


def _head_size(arg):
    if arg < 24:
        return 1
    if arg <= 0xFF:
        return 2
    if arg <= 0xFFFF:
        return 3
    if arg <= 0xFFFFFFFF:
        return 5
    return 9


def _write_head(buf, off, major, arg):
    m = major << 5
    if arg < 24:
        buf[off] = m | arg
        return 1
    if arg <= 0xFF:
        buf[off] = m | 24
        buf[off + 1] = arg
        return 2
    if arg <= 0xFFFF:
        w = 2
        buf[off] = m | 25
    elif arg <= 0xFFFFFFFF:
        w = 4
        buf[off] = m | 26
    else:
        w = 8
        buf[off] = m | 27
    i = off + w
    while i > off:
        buf[i] = arg & 0xFF
        arg >>= 8
        i -= 1
    return 1 + w


_F32 = bytearray(4)  # scratch for the float-width check: no allocation per float


def _float_head(x):
    """(CBOR initial byte, IEEE bits as an int or None for the double itself) of float x in
    its preferred width. The float32 fields are worked out by hand, as _ieee reads them
    (struct's float32 format letter is not on every MicroPython), and kept as small ints:
    on a 32-bit board an int above 2**30 would be a heap object."""
    import math

    if x != x:
        return 0xF9, 0x7E00
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    if x == 0:
        return 0xF9, sign
    if x == x * 2:  # infinity: the only non-zero float that doubling leaves unchanged
        return 0xF9, sign | 0x7C00
    m, e = math.frexp(-x if sign else x)  # |x| = m * 2**e, 0.5 <= m < 1
    e -= 1  # |x| = 1.f * 2**e
    if e > 127:
        return 0xFB, None
    if e >= -126:
        t = math.ldexp(m, 24)  # the 24-bit significand, if x has one
        exp = e + 127
    else:  # a float32 subnormal: k * 2**-149 with k < 2**23
        t = math.ldexp(-x if sign else x, 149)
        exp = 0
    mant = int(t)
    if mant != t:  # not a float32 value: the double itself
        return 0xFB, None
    mant &= 0x7FFFFF
    if exp:
        if -14 <= e <= 15 and not mant & 0x1FFF:
            return 0xF9, sign | ((e + 15) << 10) | (mant >> 13)
        if -24 <= e < -14:  # a half subnormal: m * 2**-24 with m < 1024
            m = mant | 0x800000
            shift = -1 - e
            if not m & ((1 << shift) - 1):
                return 0xF9, sign | (m >> shift)
    _F32[0] = (sign >> 8) | (exp >> 1)
    _F32[1] = ((exp & 1) << 7) | (mant >> 16)
    _F32[2] = (mant >> 8) & 0xFF
    _F32[3] = mant & 0xFF
    return 0xFA, -1  # the float32 bits are in _F32


def _float_size(x):
    ib = _float_head(x)[0]
    return 3 if ib == 0xF9 else (5 if ib == 0xFA else 9)


def _text_bytes(s):
    return s.encode("utf-8")


def size(obj, depth=0):
    """Bytes dumps(obj) takes. EncodeError for unsupported types or values, and for
    more than MAX_DEPTH nested containers (what decode() accepts; stops cycles too)."""
    if obj is None or obj is True or obj is False:
        return 1
    t = type(obj)
    if t is int:
        if obj >= 0:
            if obj > _MAX_U64:
                raise EncodeError("int too large for CBOR")
            return _head_size(obj)
        if obj < -1 - _MAX_U64:
            raise EncodeError("int too small for CBOR")
        return _head_size(-1 - obj)
    if t is float:
        return _float_size(obj)
    if t is bytes or t is bytearray or t is memoryview:
        n = len(obj)
        return _head_size(n) + n
    if t is str:
        n = len(_text_bytes(obj))
        return _head_size(n) + n
    if (t is list or t is tuple or t is dict) and depth >= MAX_DEPTH:
        raise EncodeError("CBOR nesting too deep")
    if t is list or t is tuple:
        n = _head_size(len(obj))
        for x in obj:
            n += size(x, depth + 1)
        return n
    if t is dict:
        n = _head_size(len(obj))
        for k in obj:
            n += size(k, depth + 1) + size(obj[k], depth + 1)
        return n
    raise EncodeError("type not supported by CBOR subset")


def encode_into(buf, off, obj):
    """Write obj at buf[off]; return the bytes written (size(obj) is checked first)."""
    if off + size(obj) > len(buf):
        raise EncodeError("buffer too small for CBOR item")
    return _enc(buf, off, obj)


def _enc(buf, off, obj):
    if obj is None:
        buf[off] = 0xF6
        return 1
    if obj is True:
        buf[off] = 0xF5
        return 1
    if obj is False:
        buf[off] = 0xF4
        return 1
    t = type(obj)
    if t is int:
        if obj >= 0:
            return _write_head(buf, off, 0, obj)
        return _write_head(buf, off, 1, -1 - obj)
    if t is float:
        ib, bits = _float_head(obj)
        buf[off] = ib
        if ib == 0xF9:
            buf[off + 1] = bits >> 8
            buf[off + 2] = bits & 0xFF
            return 3
        if ib == 0xFA:
            buf[off + 1 : off + 5] = _F32
            return 5
        struct.pack_into(">d", buf, off + 1, obj)
        return 9
    if t is str:
        obj = _text_bytes(obj)
        major = 3
    elif t is bytes or t is bytearray or t is memoryview:
        major = 2
    else:
        major = 0
    if major:
        n = len(obj)
        h = _write_head(buf, off, major, n)
        buf[off + h : off + h + n] = obj
        return h + n
    if t is dict:
        return _enc_map(buf, off, obj)
    p = off
    p += _write_head(buf, p, 4, len(obj))
    for x in obj:
        p += _enc(buf, p, x)
    return p - off


def _enc_map(buf, off, obj):
    p = off + _write_head(buf, off, 5, len(obj))
    if len(obj) == 1:
        for k in obj:
            p += _enc(buf, p, k)
            p += _enc(buf, p, obj[k])
        return p - off
    # Keys in RFC 8949 section 4.2.1 order (bytewise by encoded key), so every runtime
    # writes the same bytes: MicroPython's dict order is hash order, not insertion.
    keys = [(dumps(k), k) for k in obj]
    keys.sort()
    for kb, k in keys:
        n = len(kb)
        buf[p : p + n] = kb
        p += n
        p += _enc(buf, p, obj[k])
    return p - off


def dumps(obj):
    """obj as CBOR bytes. Lists and tuples encode as arrays, dicts as maps."""
    buf = bytearray(size(obj))
    _enc(buf, 0, obj)
    return bytes(buf)


def _ieee(bits, exp_bits, mant_bits):
    # IEEE 754 binary16/binary32 by hand: struct's "e" format is missing on older
    # MicroPython, and one decoder for both widths keeps them consistent.
    import math

    exp_max = (1 << exp_bits) - 1
    bias = (exp_max >> 1) + mant_bits
    exp = (bits >> mant_bits) & exp_max
    mant = bits & ((1 << mant_bits) - 1)
    if exp == 0:
        v = math.ldexp(mant, 1 - bias)
    elif exp == exp_max:
        v = float("inf") if mant == 0 else float("nan")
    else:
        v = math.ldexp(mant + (1 << mant_bits), exp - bias)
    return -v if bits >> (exp_bits + mant_bits) else v


_SIMPLE = const((False, True, None))


def _nan64(buf, p):
    # exponent all ones (checked by the caller) and a mantissa that is not zero
    if buf[p + 1] & 0x0F:
        return True
    for i in range(p + 2, p + 8):
        if buf[i]:
            return True
    return False


def _half(h):
    return _ieee(h, 5, 10)


def _check_utf8(b):
    # CPython's decoder is strict already; MicroPython's lets surrogates and overlong
    # forms through, so check the structure by hand (RFC 3629).
    i = 0
    n = len(b)
    while i < n:
        c = b[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            k = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            k = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            k = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            raise DecodeError("invalid UTF-8")
        if i + k >= n:
            raise DecodeError("truncated UTF-8")
        d = b[i + 1]
        if d < lo or d > hi:
            raise DecodeError("invalid UTF-8")
        for j in range(i + 2, i + 1 + k):
            if b[j] & 0xC0 != 0x80:
                raise DecodeError("invalid UTF-8")
        i += 1 + k


try:
    import sys

    _STRICT_DECODE = sys.implementation.name != "micropython"
    del sys  # no module global for it: each is heap on a board
except (ImportError, AttributeError):  # pragma: no cover
    _STRICT_DECODE = False


def _dec(buf, off, end, depth):  # noqa: C901 - one frame per nesting level (below)
    if off >= end:
        raise DecodeError("truncated CBOR")
    ib = buf[off]
    major = ib >> 5
    ai = ib & 0x1F
    p = off + 1
    if ai < 24:
        arg = ai
    elif ai <= 27:
        w = 1 << (ai - 24)
        if p + w > end:
            raise DecodeError("truncated CBOR head")
        if major == 7:
            return _dec_float(buf, p, ai)
        arg = 0
        for i in range(p, p + w):
            arg = (arg << 8) | buf[i]
        p += w
    elif ai == 31:
        raise DecodeError("indefinite length not supported")
    else:
        raise DecodeError("reserved additional information")
    if major == 0:
        return arg, p - off
    if major == 1:
        return -1 - arg, p - off
    if major == 2 or major == 3:
        if arg > end - p:
            raise DecodeError("CBOR string runs past end of input")
        v = bytes(buf[p : p + arg])
        if major == 3:
            v = _text(v)
        return v, p + arg - off
    if major == 4 or major == 5:
        # arrays and maps decoded here, not in a helper: each nesting level then costs the
        # board one stack frame, not two, and the rp2 port's recursion limit stays beyond
        # MAX_DEPTH (with a helper it ended a nested document first: RuntimeError)
        if depth >= MAX_DEPTH:
            raise DecodeError("CBOR nesting too deep")
        # Every item takes at least one byte: a count larger than what is left is a lie.
        if arg > (end - p) // (1 if major == 4 else 2):
            raise DecodeError("CBOR container runs past end of input")
        if major == 4:
            out = []
            for _ in range(arg):
                v, n = _dec(buf, p, end, depth + 1)
                p += n
                out.append(v)
            return out, p - off
        out = {}
        for _ in range(arg):
            k, n = _dec(buf, p, end, depth + 1)
            p += n
            v, n = _dec(buf, p, end, depth + 1)
            p += n
            if type(k) is list or type(k) is dict:
                raise DecodeError("unhashable CBOR map key")
            if k in out or (k != k and _has_nan(out)):
                raise DecodeError("duplicate CBOR map key")
            out[k] = v
        return out, p - off
    # major 7 with a small argument: false, true, null; major 6: a tag
    if major == 7 and 20 <= arg <= 22:
        return _SIMPLE[arg - 20], 1
    raise DecodeError("CBOR tags not supported" if major == 6 else "unsupported simple value")


# _dec's steps by kind of item: each returns the value (and its size where the item's
# head alone does not give it)


def _dec_float(buf, p, ai):
    # major 7 with a 1 to 8 byte argument (checked to be there): a float
    if ai == 24:
        raise DecodeError("unsupported simple value")
    if ai == 25:
        return _half((buf[p] << 8) | buf[p + 1]), 3
    if ai == 26:
        bits = (buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]
        return _ieee(bits, 8, 23), 5
    if (buf[p] & 0x7F) == 0x7F and buf[p + 1] >= 0xF0 and _nan64(buf, p):
        # by hand: the RP2040's double-to-float conversion turns a NaN into
        # infinity (found on the rp2 port)
        return float("nan"), 9
    return struct.unpack(">d", bytes(buf[p : p + 8]))[0], 9


def _text(b):
    if not _STRICT_DECODE:
        _check_utf8(b)
    try:
        return b.decode("utf-8")
    except UnicodeError:
        raise DecodeError("invalid UTF-8") from None


def _has_nan(d):
    # NaN != NaN, so `in` misses a second NaN key; but every NaN decodes to the same float
    # (one CBOR value, RFC 8949 2), and dumps() would write the key twice: a duplicate.
    for x in d:
        if x != x:
            return True
    return False


def decode(buf, off=0):
    """Decode one item at buf[off]: return (obj, size). Byte strings come back as bytes,
    text as str, arrays as lists, maps as dicts (duplicate keys are a DecodeError)."""
    if off < 0 or off > len(buf):
        raise DecodeError("offset out of range")
    return _dec(buf, off, len(buf), 0)


def loads(data):
    """Decode exactly one item spanning all of data (trailing bytes: DecodeError)."""
    obj, n = _dec(data, 0, len(data), 0)
    if n != len(data):
        raise DecodeError("trailing bytes after CBOR item")
    return obj
