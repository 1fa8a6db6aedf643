"""Peer identity: Ed25519 key pairs, the key file, libp2p PublicKey encoding and PeerIds.

Our own keys are Ed25519. Remote keys may be any libp2p key type (Ed25519, secp256k1,
ECDSA, RSA): we only need to verify their signatures, which `cryptography` does for all.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from pubmote.files.private import KeyFileError, read_private, write_private
from pubmote.p2p.codec import (
    b58decode,
    b58encode,
    decode_uvarint,
    pb_bytes,
    pb_decode,
    pb_get_bytes,
    pb_get_int,
    pb_varint,
)
from pubmote.p2p.errors import ProtocolError

# KeyType enum of the peer-ids spec.
KEY_RSA = 0
KEY_ED25519 = 1
KEY_SECP256K1 = 2
KEY_ECDSA = 3

# Multihash codes: identity (for keys up to 42 encoded bytes) and sha2-256.
_MH_IDENTITY = 0x00
_MH_SHA256 = 0x12
_MAX_INLINE_KEY = 42
_MAX_KEY_BYTES = 8192  # an RSA-8192 key fits; anything bigger is refused before parsing


class PublicKey:
    """A libp2p public key: its type and its type-specific bytes."""

    __slots__ = ("key_type", "data")

    def __init__(self, key_type: int, data: bytes) -> None:
        self.key_type = key_type
        self.data = data

    def encode(self) -> bytes:
        """The deterministic protobuf encoding (Type=1, Data=2) that PeerIds hash."""
        return pb_varint(1, self.key_type) + pb_bytes(2, self.data)

    @classmethod
    def decode(cls, buf: bytes) -> PublicKey:
        """Parse the protobuf encoding; ProtocolError when malformed or of unknown type."""
        if len(buf) > _MAX_KEY_BYTES:
            raise ProtocolError("public key too large")
        msg = pb_decode(buf)
        key_type = pb_get_int(msg, 1)
        data = pb_get_bytes(msg, 2)
        if key_type is None or data is None:
            raise ProtocolError("public key without type or data")
        if key_type not in (KEY_RSA, KEY_ED25519, KEY_SECP256K1, KEY_ECDSA):
            raise ProtocolError("unknown key type %d" % key_type)
        if key_type == KEY_ED25519 and len(data) != 32:
            raise ProtocolError("Ed25519 public key of %d bytes" % len(data))
        return cls(key_type, data)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True when `signature` over `message` is valid for this key (never raises)."""
        try:
            if self.key_type == KEY_ED25519:
                ed25519.Ed25519PublicKey.from_public_bytes(self.data).verify(signature, message)
            elif self.key_type == KEY_SECP256K1:
                k = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256K1(), self.data)
                k.verify(signature, message, ec.ECDSA(hashes.SHA256()))
            elif self.key_type == KEY_ECDSA:
                pk = serialization.load_der_public_key(self.data)
                if not isinstance(pk, ec.EllipticCurvePublicKey):
                    return False
                pk.verify(signature, message, ec.ECDSA(hashes.SHA256()))
            elif self.key_type == KEY_RSA:
                rk = serialization.load_der_public_key(self.data)
                if not isinstance(rk, rsa.RSAPublicKey):
                    return False
                rk.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
            else:
                return False
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PublicKey) and other.key_type == self.key_type
                and other.data == self.data)

    def __hash__(self) -> int:
        return hash((self.key_type, self.data))


class PeerId:
    """A PeerId: the multihash of an encoded public key, printed in base58btc."""

    __slots__ = ("raw", "_text")

    def __init__(self, raw: bytes) -> None:
        code, pos = decode_uvarint(raw)
        length, pos = decode_uvarint(raw, pos)
        if code not in (_MH_IDENTITY, _MH_SHA256) or length != len(raw) - pos:
            raise ProtocolError("not a PeerId multihash")
        if code == _MH_SHA256 and length != 32:
            raise ProtocolError("sha2-256 PeerId of %d bytes" % length)
        self.raw = bytes(raw)
        self._text = ""

    @classmethod
    def from_public_key(cls, key: PublicKey) -> PeerId:
        """The PeerId of `key`: identity multihash when it encodes in <= 42 bytes."""
        enc = key.encode()
        if len(enc) <= _MAX_INLINE_KEY:
            return cls(bytes((_MH_IDENTITY, len(enc))) + enc)
        return cls(bytes((_MH_SHA256, 32)) + hashlib.sha256(enc).digest())

    @classmethod
    def from_base58(cls, text: str) -> PeerId:
        """Parse the printed form; ValueError (ProtocolError) when it is not a PeerId."""
        try:
            return cls(b58decode(text))
        except ProtocolError as e:
            raise ValueError("not a PeerId: %s" % e) from None

    def inline_key(self) -> PublicKey | None:
        """The public key embedded in an identity-multihash PeerId, else None."""
        if self.raw[0] != _MH_IDENTITY:
            return None
        return PublicKey.decode(self.raw[2:])

    def matches(self, key: PublicKey) -> bool:
        """True when this PeerId is the PeerId of `key`."""
        return PeerId.from_public_key(key).raw == self.raw

    def to_base58(self) -> str:
        if not self._text:
            self._text = b58encode(self.raw)
        return self._text

    def __str__(self) -> str:
        return self.to_base58()

    def __repr__(self) -> str:
        return "PeerId(%s)" % self.to_base58()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PeerId) and other.raw == self.raw

    def __lt__(self, other: PeerId) -> bool:
        return self.raw < other.raw

    def __hash__(self) -> int:
        return hash(self.raw)


class KeyPair:
    """Our Ed25519 identity key pair."""

    def __init__(self, private: ed25519.Ed25519PrivateKey) -> None:
        self.private = private
        raw_pub = private.public_key().public_bytes(serialization.Encoding.Raw,
                                                    serialization.PublicFormat.Raw)
        self.public = PublicKey(KEY_ED25519, raw_pub)
        self.peer_id = PeerId.from_public_key(self.public)

    @classmethod
    def generate(cls) -> KeyPair:
        return cls(ed25519.Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyPair:
        """A key pair from a 32-byte Ed25519 seed (deterministic tests)."""
        return cls(ed25519.Ed25519PrivateKey.from_private_bytes(seed))

    def seed(self) -> bytes:
        return self.private.private_bytes(serialization.Encoding.Raw,
                                          serialization.PrivateFormat.Raw,
                                          serialization.NoEncryption())

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)

    def encode_private(self) -> bytes:
        """libp2p PrivateKey protobuf (Type=1, Data=seed||public), as go/js marshal it."""
        return pb_varint(1, KEY_ED25519) + pb_bytes(2, self.seed() + self.public.data)

    @classmethod
    def decode_private(cls, buf: bytes) -> KeyPair:
        """Parse a libp2p PrivateKey protobuf holding an Ed25519 key."""
        msg = pb_decode(buf)
        if pb_get_int(msg, 1) != KEY_ED25519:
            raise ValueError("key file: only Ed25519 keys are supported")
        data = pb_get_bytes(msg, 2)
        if data is None or len(data) not in (32, 64):
            raise ValueError("key file: Ed25519 key data must be 32 or 64 bytes")
        pair = cls.from_seed(data[:32])
        if len(data) == 64 and data[32:] != pair.public.data:
            raise ValueError("key file: public half does not match the seed")
        return pair


def load_or_create_key(path: str | os.PathLike[str], *, create: bool = True,
                       make_dirs: bool = False) -> KeyPair:
    """Load our key from `path`, or create it (mode 0600) when it does not exist; its
    folder is made only with make_dirs (the default location): a key file named in a
    folder that is not there is a typo, not a new identity.

    Refuses a key file that others can read or write: a leaked key is a stolen identity.
    Raises ValueError on a malformed or unsafe file, OSError on I/O faults.
    """
    p = Path(path)
    if not p.exists():
        if not create:
            raise FileNotFoundError(errno.ENOENT, "no such key file", str(p))
        if make_dirs:
            p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        elif not p.parent.is_dir():
            raise KeyFileError("key file %s: its folder %s does not exist (nothing was "
                               "created: a new key there would be a new identity)"
                               % (p, p.parent))
        pair = KeyPair.generate()
        try:  # never overwrite a key that appeared meanwhile
            write_private(p, pair.encode_private(), replace=False)
            return pair
        except FileExistsError:
            pass
    data = read_private(p)
    if len(data) > 1024:
        raise ValueError("key file %s is too large to be a key" % p)
    try:
        return KeyPair.decode_private(data)
    except ProtocolError as e:
        raise ValueError("key file %s is malformed: %s" % (p, e)) from None
