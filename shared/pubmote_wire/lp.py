# NDNLPv2 link protocol: LpPacket header fields, Nack, and indexed fragmentation/reassembly.
# Spec: https://redmine.named-data.net/projects/nfd/wiki/NDNLPv2 . Encoders write into a
# caller's buffer; the parser returns memoryview slices and can fill a reused LpPacket.
from .compat import const
from .errors import DecodeError, EncodeError
from .tlv import (
    TLVReader,
    nonneg_tlv_size,
    read_nonneg,
    read_tlv,
    tl_size,
    write_nonneg_tlv,
    write_tl,
    write_tlv,
)

LP_PACKET = const(0x64)
_FRAGMENT = const(0x50)
_SEQUENCE = const(0x51)
_FRAG_INDEX = const(0x52)
_FRAG_COUNT = const(0x53)
_PIT_TOKEN = const(0x62)
_NACK = const(0x0320)
_NACK_REASON = const(0x0321)
_NEXT_HOP_FACE_ID = const(0x0330)
_INCOMING_FACE_ID = const(0x0331)
_CONGESTION_MARK = const(0x0340)
_ACK = const(0x0344)
_TX_SEQUENCE = const(0x0348)

NACK_NONE = const(0)
NACK_CONGESTION = const(50)
NACK_DUPLICATE = const(100)
NACK_NO_ROUTE = const(150)
# Pass as nack_reason to send a Nack without a NackReason element (python-ndn rejects
# those, so only tests and re-encoding of received packets want it).
NACK_NO_ELEMENT = const(-1)

_SEQ_FIELD = const(10)  # a Sequence element: T (1 octet), L=8, 8 octets
_MAX_PIT_TOKEN = const(32)

# Field kinds. The header fields, in the increasing TLV-TYPE order ndn-cxx requires, with
# the LpPacket attribute each fills; tables keep this module small to compile on a board.
_U64 = const(0)  # fixed 8 octets
_NNI = const(1)  # NonNegativeInteger
_TOKEN = const(2)  # 1-32 octets
_NACK_KIND = const(3)
_ACKS = const(4)  # repeatable fixed 8 octets
_HEADERS = (
    (_SEQUENCE, _U64, "sequence"),
    (_FRAG_INDEX, _NNI, "frag_index"),
    (_FRAG_COUNT, _NNI, "frag_count"),
    (_PIT_TOKEN, _TOKEN, "pit_token"),
    (_NACK, _NACK_KIND, "nack_reason"),
    (_NEXT_HOP_FACE_ID, _NNI, "next_hop_face_id"),
    (_INCOMING_FACE_ID, _NNI, "incoming_face_id"),
    (_CONGESTION_MARK, _NNI, "congestion_mark"),
    (_ACK, _ACKS, "acks"),
    (_TX_SEQUENCE, _U64, "tx_sequence"),
)
_BY_TYPE = {}
for _h in _HEADERS:
    _BY_TYPE[_h[0]] = _h
del _h


class LpPacket:
    """A decoded LpPacket. Absent fields are None; fragment is a memoryview (or None
    for an IDLE packet), pit_token a memoryview, acks a list (reused by decode_lp
    into=). nack_reason is None when the packet is not a Nack; a Nack without a
    NackReason element reads as NACK_NONE with nack_has_reason False."""

    def __init__(self):
        self.acks = []
        self.reset()

    def reset(self):
        for h in _HEADERS:
            if h[1] != _ACKS:
                setattr(self, h[2], None)
        self.fragment = None
        self.nack_has_reason = False
        del self.acks[:]


def is_lp(buf):
    """True if buf starts like an LpPacket (rather than a bare Interest or Data)."""
    return len(buf) > 0 and buf[0] == LP_PACKET


def _field(buf, p, typ, kind, v):
    # Size of one header field (buf None) or write it at buf[p]; returns the bytes.
    if kind == _U64:
        if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            raise EncodeError("sequence out of range")
        if buf is None:
            return tl_size(typ, 8)
        h = write_tl(buf, p, typ, 8)
        i = p + h + 7
        while i >= p + h:
            buf[i] = v & 0xFF
            v >>= 8
            i -= 1
        return h + 8
    if kind == _NNI:
        if buf is None:
            return nonneg_tlv_size(typ, v)
        return write_nonneg_tlv(buf, p, typ, v)
    if kind == _TOKEN:
        if len(v) < 1 or len(v) > _MAX_PIT_TOKEN:
            raise EncodeError("PitToken must be 1-32 octets")
        return tl_size(typ, len(v)) if buf is None else write_tlv(buf, p, typ, v)
    if kind == _ACKS:
        n = 0
        for a in v:
            n += _field(buf, p + n, typ, _U64, a)
        return n
    # Nack: python-ndn wants a NackReason inside, so one is written unless NACK_NO_ELEMENT.
    inner = 0 if v == NACK_NO_ELEMENT else nonneg_tlv_size(_NACK_REASON, v)
    if buf is None:
        return tl_size(typ, inner)
    h = write_tl(buf, p, typ, inner)
    if inner:
        h += write_nonneg_tlv(buf, p + h, _NACK_REASON, v)
    return h


def _write(buf, off, fragment, values):
    # One pass sizes (buf None), the other writes; values follow _HEADERS.
    p = off
    for i in range(len(_HEADERS)):
        v = values[i]
        if v is not None:
            h = _HEADERS[i]
            p += _field(buf, p, h[0], h[1], v)
    if fragment is not None:
        if buf is None:
            p += tl_size(_FRAGMENT, len(fragment))
        else:
            p += write_tlv(buf, p, _FRAGMENT, fragment)
    return p - off


def _values(fields):
    # Keyword arguments -> a list in _HEADERS order; an unknown name is API misuse.
    values = [None] * len(_HEADERS)
    for i in range(len(_HEADERS)):
        values[i] = fields.pop(_HEADERS[i][2], None)
    if fields:
        raise TypeError("unknown LpPacket field")
    return values


def lp_size(fragment=None, **fields):
    """Bytes encode_lp() writes for the same arguments."""
    return tl_size(LP_PACKET, _write(None, 0, fragment, _values(fields)))


def encode_lp(buf, off, fragment=None, **fields):
    """Write an LpPacket at buf[off]; return the bytes written. Keywords: sequence,
    frag_index, frag_count, pit_token, nack_reason, incoming_face_id, next_hop_face_id,
    congestion_mark, tx_sequence, acks (None = absent). nack_reason makes it a Nack
    (NACK_NO_ELEMENT: one without a NackReason). Header fields go in increasing
    TLV-TYPE order (ndn-cxx checks it), the Fragment last."""
    values = _values(fields)
    inner = _write(None, 0, fragment, values)
    if off + tl_size(LP_PACKET, inner) > len(buf):
        raise EncodeError("buffer too small for LpPacket")
    h = write_tl(buf, off, LP_PACKET, inner)
    return h + _write(buf, off + h, fragment, values)


def encode(fragment=None, **fields):
    """Convenience: the LpPacket (same keywords as encode_lp) as a new bytes object."""
    buf = bytearray(lp_size(fragment, **fields))
    encode_lp(buf, 0, fragment, **fields)
    return bytes(buf)


def encode_nack(buf, off, interest_bytes, reason):
    """Write a Nack (with a NackReason element) carrying the rejected Interest."""
    return encode_lp(buf, off, interest_bytes, nack_reason=reason)


def decode_lp(buf, into=None):
    """Parse one LpPacket spanning all of buf. Returns an LpPacket (into, reset and
    filled, if given) whose fragment/pit_token are memoryviews into buf."""
    typ, vstart, vend = read_tlv(buf, 0)
    if typ != LP_PACKET:
        raise DecodeError("not an LpPacket")
    if vend != len(buf):
        raise DecodeError("trailing bytes after LpPacket")
    pkt = into if into is not None else LpPacket()
    pkt.reset()
    r = TLVReader(buf, vstart, vend)
    while r.next():
        t = r.typ
        if pkt.fragment is not None:
            raise DecodeError("field after Fragment")
        if t == _FRAGMENT:
            pkt.fragment = r.value()
            continue
        h = _BY_TYPE.get(t)
        if h is None:
            # NDNLPv2: only unknown fields in [800, 959] with the two low bits 0 may be ignored.
            if 800 <= t <= 959 and (t & 3) == 0:
                continue
            raise DecodeError("unknown LpPacket field %d" % t)
        kind = h[1]
        n = r.vend - r.vstart
        if kind == _ACKS or kind == _U64:
            if n != 8:
                raise DecodeError("sequence must be 8 octets")
            v = read_nonneg(buf, r.vstart, 8)
            if kind == _ACKS:
                pkt.acks.append(v)
                continue
        elif kind == _NNI:
            v = r.nonneg()
        elif kind == _TOKEN:
            if n < 1 or n > _MAX_PIT_TOKEN:
                raise DecodeError("bad PitToken")
            v = r.value()
        else:
            v = _parse_nack(r, pkt)
        if getattr(pkt, h[2]) is not None:
            raise DecodeError("repeated LpPacket field %d" % t)
        setattr(pkt, h[2], v)
    return pkt


def _parse_nack(r, pkt):
    inner = TLVReader(r.buf, r.vstart, r.vend)
    reason = NACK_NONE
    while inner.next():
        if inner.typ == _NACK_REASON:
            if pkt.nack_has_reason:
                raise DecodeError("repeated NackReason")
            reason = inner.nonneg()
            pkt.nack_has_reason = True
        else:
            inner.skip_unknown()
    return reason
