# NDN Data packets (v0.3), what a board uses: Name, MetaInfo, Content, SignatureInfo,
# SignatureValue; written into a caller's buffer from their parts (encode_parts: the
# signature over Name..SignatureInfo), decoded into memoryviews. data.py is the whole API:
# this and what a board seldom or never calls (encode_data and its conveniences,
# verify_data), which would be heap on every board.
from . import namewire, tlv
from .compat import const
from .errors import DecodeError, EncodeError
from .signature import DIGEST, parse_info

DATA = const(0x06)  # the packet's TLV type
_NAME = const(0x07)
_META_INFO = const(0x14)
_CONTENT = const(0x15)
_SIG_INFO = const(0x16)
_SIG_VALUE = const(0x17)
_CONTENT_TYPE = const(0x18)
_FRESHNESS = const(0x19)
_FINAL_BLOCK_ID = const(0x1A)

# ContentType BLOB (the one pubmote writes; LINK 1, KEY 2, NACK 3 are only read: not module
# globals, each of which is heap on a board)
BLOB = const(0)

def _clear(d):
    d.name = d.content_type = d.freshness_ms = d.final_block_id = d.content = None
    d.sig_type = d.sig_key_name = d.sig_nonce = d.sig_time_ms = d.sig_seq = None
    d.sig_value = None
    d.signed_start = d.signed_end = -1


# A decoded Data packet; byte fields are memoryview slices of the input. signed_start and
# signed_end: where in the input the signature covers (Name to SignatureInfo); reader and
# reader2: the TLV readers each decode into it reuses.
class Data:

    def __init__(self):
        _clear(self)
        self.reader = tlv.TLVReader(b"")
        self.reader2 = tlv.TLVReader(b"")

    # [(start, end)] of the input the signature covers (Name through SignatureInfo).
    @property
    def signed_regions(self):
        if self.signed_end < 0:
            return None
        return [(self.signed_start, self.signed_end)]


def encode_parts(buf, off, name, n2, n3, n4, content, ct, fresh, fbi, signer):
    # The codec's Data writer (encode_data, and notify.py's msg and ack Data, call it).
    # Sizes by arithmetic, then fields written in place (buf None: return the size only).
    # The name is name + n2 + n3 (+ generic n4), see signature.put_name.
    if signer is None:
        signer = DIGEST
    m = 0
    if ct is not None:
        m += tlv.nonneg_tlv_size(_CONTENT_TYPE, ct)
    if fresh is not None:
        m += tlv.nonneg_tlv_size(_FRESHNESS, fresh)
    if fbi is not None:
        m += tlv.tl_size(_FINAL_BLOCK_ID, len(fbi))
    nl = namewire.name_len(name, n2, n3, n4)
    vl = tlv.tl_size(_NAME, nl) + signer.info_size() + 2 + signer.sig_len
    if m:
        vl += tlv.tl_size(_META_INFO, m)
    if content is not None:
        vl += tlv.tl_size(_CONTENT, len(content))
    total = tlv.tl_size(DATA, vl)
    if buf is None:
        return total
    if off + total > len(buf):
        raise EncodeError("buffer too small")
    p = off + tlv.write_tl(buf, off, DATA, vl)
    s0 = p
    p += tlv.write_tl(buf, p, _NAME, nl)
    p = namewire.put_name(buf, p, name, n2, n3, n4)
    if m:
        p += tlv.write_tl(buf, p, _META_INFO, m)
        if ct is not None:
            p += tlv.write_nonneg_tlv(buf, p, _CONTENT_TYPE, ct)
        if fresh is not None:
            p += tlv.write_nonneg_tlv(buf, p, _FRESHNESS, fresh)
        if fbi is not None:
            p += tlv.write_tlv(buf, p, _FINAL_BLOCK_ID, fbi)
    if content is not None:
        p += tlv.write_tlv(buf, p, _CONTENT, content)
    p += signer.write_info(buf, p, _SIG_INFO)
    p += tlv.write_tlv(buf, p, _SIG_VALUE, signer.sign2(memoryview(buf), s0, p, -1, -1))
    return p - off


# Write a Data packet at buf[off]; return the bytes written (buf None: just count).
# Parse one Data TLV that fills buf exactly; return a Data (into, if given).
def decode_data(buf, into=None):
    d = into if into is not None else Data()
    mv = memoryview(buf)
    r = d.reader
    r.reset(buf)
    if not r.next() or r.typ != DATA or r.vend != len(mv):
        raise DecodeError("bad Data")
    _clear(d)
    d.signed_start = r.vstart
    r.reset(buf, r.vstart, r.vend)
    rank = 0
    while r.next():
        t = r.typ
        vs = r.vstart
        ve = r.vend
        if rank == 0:
            if t != _NAME:
                raise DecodeError("bad Data")
            namewire.walk(buf, vs, ve, False)
            d.name = mv[vs:ve]
            rank = 1
            continue
        k = t - 0x12 if 0x14 <= t <= 0x17 else 0  # MetaInfo 2 .. SignatureValue 5
        if k <= rank:  # unknown, repeated or out of order
            if tlv.is_critical(t):
                raise DecodeError("unknown critical TLV")
            continue
        rank = k
        if k == 3:
            d.content = mv[vs:ve]
        elif k == 2:
            _parse_meta_info(d, buf, mv, vs, ve)
        elif k == 4:
            parse_info(d, d.reader2, buf, vs, ve, False)
            d.signed_end = ve
        else:
            d.sig_value = mv[vs:ve]
    if d.signed_end < 0 or d.sig_value is None:
        raise DecodeError("bad Data")
    return d


# MetaInfo's fields into d (the first of each; a repeat is skipped).
def _parse_meta_info(d, buf, mv, vs, ve):
    q = d.reader2
    q.reset(buf, vs, ve)
    while q.next():
        t = q.typ
        if t == _CONTENT_TYPE and d.content_type is None:
            d.content_type = q.nonneg()
        elif t == _FRESHNESS and d.freshness_ms is None:
            d.freshness_ms = q.nonneg()
        elif t == _FINAL_BLOCK_ID and d.final_block_id is None:
            if q.vend == q.vstart or namewire.comp_end(buf, q.vstart, q.vend) != q.vend:
                raise DecodeError("bad name component")
            d.final_block_id = mv[q.vstart : q.vend]
        elif tlv.is_critical(t):
            raise DecodeError("unknown critical TLV")
