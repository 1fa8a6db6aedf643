# HmacWithSha256 for NDN signatures, apart from signature.py so a board without a key never
# loads it. HMAC is built on sha256 (RFC 2104) because MicroPython has no hmac module, and
# micropython-lib's hmac (3.4.4) costs more heap. Measured on the emulated Pico (rp2 port
# 1.27, both compiled from source into RAM; 32-byte key, 200-byte message): importing it
# 1,376 B vs 800 B for this module (320 B frozen); one HMAC 1,024 B allocated vs 848 B
# here (384 B with an HmacSigner's pads kept); an hmac.HMAC object 352 B vs an HmacSigner's
# 192 B, and the HMAC is spent by digest() (the port's sha256 has no copy()), so a signer
# would make one per signature.
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
