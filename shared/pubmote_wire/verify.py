# Checking the signatures the codec can make itself, DigestSha256 and HmacWithSha256, over
# regions of the signed packet (hashed in place, no copy). Loaded by verify_interest and
# verify_data when first called: a board that checks no signature never holds it.
from .hmac256 import HmacSigner
from .signature import DIGEST, DIGEST_SHA256, HMAC_SHA256

_HMAC = [None, None]  # the last HMAC key and its signer: its pads are computed once


# Compare all bytes whatever the first difference (timing-safe enough for HMAC).
def equal(a, b):
    if len(a) != len(b):
        return False
    r = 0
    for i in range(len(a)):
        r |= a[i] ^ b[i]
    return r == 0


def _signer(sig_type, sig_value, key):
    if sig_value is None:
        return None
    if sig_type == DIGEST_SHA256:
        return DIGEST
    if sig_type != HMAC_SHA256 or key is None:
        return None
    if _HMAC[0] != key:
        _HMAC[1] = HmacSigner(key)
        _HMAC[0] = bytes(key)
    return _HMAC[1]


# Check a DigestSha256 or HmacWithSha256 signature over regions of buf; other
# types (and HMAC without a key) give False: this codec cannot check them.
def verify(sig_type, sig_value, buf, regions, key=None):
    s = _signer(sig_type, sig_value, key)
    return s is not None and equal(s.sign(buf, *regions), sig_value)


# verify() over one or two regions of buf (s1 < 0: one), the decoders' path: no lists.
def verify2(sig_type, sig_value, buf, s0, e0, s1, e1, key=None):
    s = _signer(sig_type, sig_value, key)
    return s is not None and equal(s.sign2(memoryview(buf), s0, e0, s1, e1), sig_value)
