# NDN signatures the codec can make itself: the signature types, (Interest)SignatureInfo
# written and parsed, and the signers' base, which is DigestSha256 itself. HmacSigner
# (hmac256.py) and the checking of signatures (verify.py) are loaded only where they are
# used. Every hash is fed region by region from a memoryview so signing copies nothing.
from . import tlv
from .compat import const, sha256
from .errors import DecodeError
from .namewire import walk

DIGEST_SHA256 = const(0)
SHA256_WITH_RSA = const(1)
SHA256_WITH_ECDSA = const(3)
HMAC_SHA256 = const(4)
ED25519 = const(5)

# (the SignatureInfo/Value TLV types are the callers': 0x16/0x17 in Data, 0x2C/0x2E in
# Interests; not module globals here, which are heap on a board)
_SIGNATURE_TYPE = const(0x1B)
_KEY_LOCATOR = const(0x1C)
_NAME = const(0x07)
_SIG_NONCE = const(0x26)
_SIG_TIME = const(0x28)
_SIG_SEQ = const(0x2A)


def _nonce_tlv(v):
    # SignatureNonce is raw bytes per the spec; an int is written as python-ndn does (uint).
    return tlv.nonneg_tlv_size(_SIG_NONCE, v) if isinstance(v, int) else tlv.tl_size(_SIG_NONCE, len(v))


class Signer:
    """A signer: DigestSha256 itself (DigestSigner), and the base of the others, which set
    sig_type, sig_len and key_name and hash with _begin() -> hash object and _end(hash) ->
    signature bytes (HmacSigner). One class, not a base and a subclass: each class is heap
    on a board, which signs with DigestSha256 (its one DIGEST) or HMAC."""

    def __init__(self):
        self.sig_type = DIGEST_SHA256
        self.sig_len = 32
        self.key_name = None

    def _begin(self):
        return sha256()

    def _end(self, h):
        return h.digest()

    def _info_len(self, sig_nonce, sig_time_ms, sig_seq):
        n = 3
        if self.key_name is not None:
            n += tlv.tl_size(_KEY_LOCATOR, tlv.tl_size(_NAME, len(self.key_name)))
        if sig_nonce is not None:
            n += _nonce_tlv(sig_nonce)
        if sig_time_ms is not None:
            n += tlv.nonneg_tlv_size(_SIG_TIME, sig_time_ms)
        if sig_seq is not None:
            n += tlv.nonneg_tlv_size(_SIG_SEQ, sig_seq)
        return n

    # Bytes of the whole (Interest)SignatureInfo TLV.
    def info_size(self, interest=False, sig_nonce=None, sig_time_ms=None, sig_seq=None):
        return tlv.tl_size(0x16, self._info_len(sig_nonce, sig_time_ms, sig_seq))

    # Write SignatureInfo (0x16) or InterestSignatureInfo (0x2c); return bytes written.
    def write_info(self, buf, off, typ_tlv, sig_nonce=None, sig_time_ms=None, sig_seq=None):
        p = off + tlv.write_tl(buf, off, typ_tlv, self._info_len(sig_nonce, sig_time_ms, sig_seq))
        p += tlv.write_nonneg_tlv(buf, p, _SIGNATURE_TYPE, self.sig_type)
        kn = self.key_name
        if kn is not None:
            p += tlv.write_tl(buf, p, _KEY_LOCATOR, tlv.tl_size(_NAME, len(kn)))
            p += tlv.write_tlv(buf, p, _NAME, kn)
        if sig_nonce is not None:
            if isinstance(sig_nonce, int):
                p += tlv.write_nonneg_tlv(buf, p, _SIG_NONCE, sig_nonce)
            else:
                p += tlv.write_tlv(buf, p, _SIG_NONCE, sig_nonce)
        if sig_time_ms is not None:
            p += tlv.write_nonneg_tlv(buf, p, _SIG_TIME, sig_time_ms)
        if sig_seq is not None:
            p += tlv.write_nonneg_tlv(buf, p, _SIG_SEQ, sig_seq)
        return p - off

    # The 32-byte signature over the (start, end) regions of buf, in order.
    def sign(self, buf, *regions):
        mv = memoryview(buf)
        h = self._begin()
        for r in regions:
            h.update(mv[r[0] : r[1]])
        return self._end(h)

    def sign2(self, mv, s0, e0, s1, e1):
        # The encoders' path: one or two regions of a memoryview (s1 < 0: one), no tuples.
        h = self._begin()
        h.update(mv[s0:e0])
        if s1 >= 0:
            h.update(mv[s1:e1])
        return self._end(h)


# DigestSha256: the signature is the SHA-256 of the signed portion (Signer's own).
DigestSigner = Signer
DIGEST = DigestSigner()  # one is enough: it holds no state
# Parse a (Interest)SignatureInfo value buf[p:e] with the TLVReader q into
# obj.sig_type, sig_key_name, sig_nonce, sig_time_ms, sig_seq. strict=False skips
# unknown critical elements, as python-ndn does for Data (v0.2 types had their own).
def parse_info(obj, q, buf, p, e, strict):
    q.reset(buf, p, e)
    while q.next():
        t = q.typ
        if t == _SIGNATURE_TYPE and obj.sig_type is None:
            obj.sig_type = q.nonneg()
        elif t == _KEY_LOCATOR:
            # A Name (kept) or a KeyDigest (ignored), filling the KeyLocator.
            t, s, v = tlv.read_tlv(buf, q.vstart, q.vend)
            if v != q.vend or (t != _NAME and t != 0x1D):
                raise DecodeError("bad SignatureInfo")
            if t == _NAME:
                walk(buf, s, v, False)
                obj.sig_key_name = memoryview(buf)[s:v]  # only here: no view otherwise
        elif t == _SIG_NONCE:
            obj.sig_nonce = memoryview(buf)[q.vstart : q.vend]
        elif t == _SIG_TIME:
            obj.sig_time_ms = q.nonneg()
        elif t == _SIG_SEQ:
            obj.sig_seq = q.nonneg()
        elif strict and tlv.is_critical(t):
            raise DecodeError("unknown critical TLV")
    if obj.sig_type is None:
        raise DecodeError("bad SignatureInfo")
