# HmacWithSha256 for NDN signatures, apart from signature.py so a board without a key never
# loads it. HMAC is built on sha256 (RFC 2104) because MicroPython has no hmac module, and
# micropython-lib's hmac costs a board more heap: a bigger module, more allocated per HMAC
# and a bigger object, which digest() spends (the port's sha256 has no copy()), so a signer
# would need a new one per signature; an HmacSigner keeps its key's pads instead.
from .compat import const, sha256
from .signature import HMAC_SHA256, Signer

_BLOCK = const(64)


def _pads(key):
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    k = bytearray(_BLOCK)
    k[: len(key)] = key
    ipad = bytearray(_BLOCK)
    opad = bytearray(_BLOCK)
    for i in range(_BLOCK):
        ipad[i] = k[i] ^ 0x36
        opad[i] = k[i] ^ 0x5C
    return bytes(ipad), bytes(opad)


# HMAC-SHA256 (RFC 2104) of the concatenation of chunks.
def hmac_sha256(key, *chunks):
    ipad, opad = _pads(key)
    h = sha256(ipad)
    for c in chunks:
        h.update(c)
    o = sha256(opad)
    o.update(h.digest())
    return o.digest()


# HmacWithSha256 with a shared key; key_name (a Name) goes into the KeyLocator.
class HmacSigner(Signer):

    def __init__(self, key, key_name=None):
        self.sig_type = HMAC_SHA256
        self.sig_len = 32
        self.key_name = None if key_name is None else bytes(key_name)
        self._ipad, self._opad = _pads(bytes(key))

    def _begin(self):
        return sha256(self._ipad)

    def _end(self, h):
        o = sha256(self._opad)
        o.update(h.digest())
        return o.digest()
