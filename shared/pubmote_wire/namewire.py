# Names at the byte level: check and walk component TLVs, make one, measure and write a
# Name from parts. Its own small module so that parsing packets loads neither the URI code
# of name.py nor the signers, and each compiles in a small heap.
from . import tlv
from .errors import DecodeError


# Check the component TLV at buf[p] (within e); return its end (an int: no tuple to allocate).
def comp_end(buf, p, e):
    t = buf[p]
    if t < 0xFD:
        p += 1
    else:
        t, k = tlv.read_varnum(buf, p, e)
        p += k
    if p >= e:
        raise DecodeError("truncated")
    n = buf[p]
    if n < 0xFD:
        p += 1
    else:
        n, k = tlv.read_varnum(buf, p, e)
        p += k
    if n > e - p or t == 0 or t > 0xFFFF or (t < 3 and n != 32):
        raise DecodeError("bad name component")
    return p + n


# Validate the components in buf[p:e]; return the offset of the first
# ParametersSha256Digest component or -1 (with single, a second one is an error).
def walk(buf, p, e, single):
    dpos = -1
    while p < e:
        t = buf[p]
        if 2 < t < 0xFD and p + 1 < e and buf[p + 1] < 0xFD:  # the usual short component
            p += 2 + buf[p + 1]
            if p > e:
                raise DecodeError("bad name component")
            continue
        s = p
        if t >= 0xFD:  # a long type (rare): only its value matters here
            t = tlv.read_varnum(buf, p, e)[0]
        p = comp_end(buf, p, e)
        if t == 2:
            if dpos < 0:
                dpos = s
            elif single:
                raise DecodeError("bad ParametersSha256Digest")
    return dpos


# Names the encoders assemble from parts without concatenating bytes: name + n2 + n3 and,
# if n4 is not None, a GenericNameComponent holding n4 (None parts are left out).
def name_len(name, n2, n3, n4):
    n = len(name)
    if n2 is not None:
        n += len(n2)
    if n3 is not None:
        n += len(n3)
    if n4 is not None:
        n += tlv.tl_size(8, len(n4))
    return n


# Write the parts of a Name value at buf[p]; return the new offset.
def put_name(buf, p, name, n2, n3, n4):
    e = p + len(name)
    buf[p:e] = name
    if n2 is not None:
        p = e + len(n2)
        buf[e:p] = n2
        e = p
    if n3 is not None:
        p = e + len(n3)
        buf[e:p] = n3
        e = p
    if n4 is not None:
        e += tlv.write_tlv(buf, e, 8, n4)
    return e


# A component TLV of type typ holding the bytes-like value.
def component(typ, value):
    if typ <= 0 or typ > 0xFFFF:
        from .errors import EncodeError

        raise EncodeError("bad name component")
    n = len(value)
    out = bytearray(tlv.varnum_size(typ) + tlv.varnum_size(n) + n)
    h = tlv.write_varnum(out, 0, typ)
    h += tlv.write_varnum(out, h, n)
    out[h:] = value
    return bytes(out)


# A component of type typ (under 253) holding the NonNegativeInteger n.
def number_component(typ, n):
    w = tlv.nonneg_size(n)
    out = bytearray(2 + w)
    out[0] = typ
    out[1] = w
    tlv.write_nonneg(out, 2, n)
    return bytes(out)
