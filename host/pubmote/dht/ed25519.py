"""Ed25519 signing from an *expanded* 64-byte secret key (scalar + prefix).

libtorrent and BEP 44's published test key use the expanded form (SHA-512 of the seed,
clamped), which `cryptography` cannot load: it only signs from the 32-byte seed. This
module signs from the expanded form with plain integer arithmetic (RFC 8032, section 5.1),
so the BEP's key reproduces the BEP's signatures. Verification is left to `cryptography`.
Not constant-time: it is for keys that are public test keys or imported from libtorrent;
keys generated here are seeds and sign through `cryptography`.
"""

from __future__ import annotations

import hashlib

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_BY = 46316835694926478169428394003475163141307993866256225615783033603165251855960
_B = (_BX, _BY, 1, _BX * _BY % _P)

Point = tuple[int, int, int, int]  # extended coordinates X, Y, Z, T


def _add(p: Point, q: Point) -> Point:
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = 2 * t1 * t2 * _D % _P
    d = 2 * z1 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _mul(s: int, p: Point) -> Point:
    q: Point = (0, 1, 1, 0)  # the neutral element
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _encode(p: Point) -> bytes:
    x, y, z, _ = p
    zi = pow(z, _P - 2, _P)
    x, y = x * zi % _P, y * zi % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def expand_seed(seed: bytes) -> bytes:
    """The 64-byte expanded secret (libtorrent's form) of a 32-byte seed."""
    if len(seed) != 32:
        raise ValueError("an ed25519 seed is 32 bytes")
    h = bytearray(hashlib.sha512(seed).digest())
    h[0] &= 248
    h[31] &= 63
    h[31] |= 64
    return bytes(h)


def public_key(expanded: bytes) -> bytes:
    """The 32-byte public key of an expanded secret."""
    if len(expanded) != 64:
        raise ValueError("an expanded ed25519 secret is 64 bytes")
    return _encode(_mul(int.from_bytes(expanded[:32], "little"), _B))


def sign(expanded: bytes, msg: bytes, public: bytes | None = None) -> bytes:
    """The 64-byte signature of msg by an expanded secret (deterministic, as RFC 8032)."""
    if len(expanded) != 64:
        raise ValueError("an expanded ed25519 secret is 64 bytes")
    a = int.from_bytes(expanded[:32], "little")
    pub = public if public is not None else _encode(_mul(a, _B))
    r = int.from_bytes(hashlib.sha512(expanded[32:] + msg).digest(), "little") % _L
    big_r = _encode(_mul(r, _B))
    h = int.from_bytes(hashlib.sha512(big_r + pub + msg).digest(), "little") % _L
    s = (r + h * a) % _L
    return big_r + s.to_bytes(32, "little")
