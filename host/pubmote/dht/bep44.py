"""BEP 44 mutable (and immutable) items: keys, the signed buffer, targets, put checks,
bounded item storage and write tokens. Sans-IO; the node sends what these return.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from pubmote.dht import bencode, ed25519
from pubmote.dht.krpc import (
    CAS_MISMATCH,
    INVALID_SIGNATURE,
    MESSAGE_TOO_BIG,
    PROTOCOL_ERROR,
    SALT_TOO_BIG,
    SEQ_TOO_LOW,
    KrpcError,
)
from pubmote.files.private import read_private, write_private

MAX_V = 1000  # bencoded size of `v`
MAX_SALT = 64
KEY_LEN = 32
SIG_LEN = 64
TOKEN_LEN = 8
TOKEN_ROTATE_S = 300.0  # a token stays valid for one to two rotations (5-10 minutes)


def signed_buffer(salt: bytes, seq: int, v_bencoded: bytes) -> bytes:
    """The bytes an item's signature covers: `4:salt<n>:<salt>3:seqi<seq>e1:v<v>`, the salt
    part only when the salt is not empty (BEP 44)."""
    out = b""
    if salt:
        out = b"4:salt%d:" % len(salt) + salt
    return out + b"3:seqi%de1:v" % seq + v_bencoded


def mutable_target(key: bytes, salt: bytes = b"") -> bytes:
    """SHA-1(k + salt), the DHT key of a mutable item."""
    return hashlib.sha1(key + salt).digest()


def immutable_target(v_bencoded: bytes) -> bytes:
    return hashlib.sha1(v_bencoded).digest()


def verify(key: bytes, sig: bytes, buf: bytes) -> bool:
    if len(key) != KEY_LEN or len(sig) != SIG_LEN:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(sig, buf)
    except (InvalidSignature, ValueError):
        return False
    return True


class KeyPair:
    """An ed25519 key: from a 32-byte seed (signs through `cryptography`) or from a 64-byte
    expanded secret as libtorrent and the BEP's test vectors hold it."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) == 32:
            self._seed: bytes | None = secret
            self._key: Ed25519PrivateKey | None = Ed25519PrivateKey.from_private_bytes(secret)
            self.public = self._key.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            self.expanded = ed25519.expand_seed(secret)
        elif len(secret) == 64:
            self._seed = None
            self._key = None
            self.expanded = secret
            self.public = ed25519.public_key(secret)
        else:
            raise ValueError("an ed25519 secret is a 32-byte seed or a 64-byte expanded key")

    @classmethod
    def generate(cls) -> KeyPair:
        return cls(os.urandom(32))

    @classmethod
    def load(cls, path: str | Path, *, create: bool = False) -> KeyPair:
        """A key file: the secret as hex (64 or 128 hex digits) on its first line.

        With create=True a missing file is made with a fresh seed (mode 0600).
        """
        p = Path(path)
        if create and not p.exists():
            kp = cls.generate()
            try:
                write_private(p, (kp.secret_hex() + "\n").encode(), replace=False)
                return kp
            except FileExistsError:
                pass  # made meanwhile by another process: use that one
        raw = read_private(p)  # KeyFileError (a ValueError) when others may read it
        try:
            words = raw.decode().split()
            return cls(bytes.fromhex(words[0] if words else ""))
        except (UnicodeDecodeError, ValueError) as e:
            raise ValueError("%s: not an ed25519 secret in hex: %s" % (path, e)) from None

    def secret_hex(self) -> str:
        return (self._seed if self._seed is not None else self.expanded).hex()

    def sign(self, msg: bytes) -> bytes:
        if self._key is not None:
            return self._key.sign(msg)
        return ed25519.sign(self.expanded, msg, self.public)


class MutableItem:
    """A signed mutable item; `v` is kept bencoded, exactly the bytes that were signed."""

    __slots__ = ("key", "salt", "seq", "v", "sig")

    def __init__(self, key: bytes, salt: bytes, seq: int, v: bytes, sig: bytes) -> None:
        self.key = key
        self.salt = salt
        self.seq = seq
        self.v = v
        self.sig = sig

    @property
    def target(self) -> bytes:
        return mutable_target(self.key, self.salt)

    def value(self) -> Any:
        """`v` decoded (bytes for a string value)."""
        return bencode.decode(self.v)

    def verify(self) -> bool:
        return verify(self.key, self.sig, signed_buffer(self.salt, self.seq, self.v))

    def put_args(self, node_id: bytes, token: bytes, cas: int | None = None) -> dict[bytes, Any]:
        """The `a` of a put query carrying this item."""
        a: dict[bytes, Any] = {b"id": node_id, b"k": self.key, b"seq": self.seq,
                               b"sig": self.sig, b"token": token, b"v": _raw(self.v)}
        if self.salt:
            a[b"salt"] = self.salt
        if cas is not None:
            a[b"cas"] = cas
        return a

    def get_fields(self) -> dict[bytes, Any]:
        """The item's fields of a get response (k, seq, sig, v)."""
        return {b"k": self.key, b"seq": self.seq, b"sig": self.sig, b"v": _raw(self.v)}

    def __repr__(self) -> str:
        return "MutableItem(k=%s, salt=%r, seq=%d, %d-byte v)" % (
            self.key.hex()[:16], self.salt, self.seq, len(self.v))


def _raw(v: bytes) -> Any:
    # the bencoder re-encodes decoded values canonically, so decoding is exact and cheap
    return bencode.decode(v)


def sign_item(keypair: KeyPair, value: Any, seq: int, salt: bytes = b"") -> MutableItem:
    """Sign `value` (any bencodable; bytes for a string) as a mutable item.

    Raises ValueError when the value or salt is over BEP 44's limits.
    """
    v = bencode.encode(value)
    if len(v) > MAX_V:
        raise ValueError("value bencodes to %d bytes; BEP 44 allows %d" % (len(v), MAX_V))
    if len(salt) > MAX_SALT:
        raise ValueError("salt of %d bytes; BEP 44 allows %d" % (len(salt), MAX_SALT))
    if seq < 0:
        raise ValueError("seq must not be negative")
    sig = keypair.sign(signed_buffer(salt, seq, v))
    return MutableItem(keypair.public, salt, seq, v, sig)


def item_from_fields(d: dict[bytes, Any], salt: bytes = b"") -> MutableItem:
    """A mutable item from the fields of a put query or get response; checks types and
    limits and the signature, raising KrpcError with BEP 44's code."""
    k, seq, sig = d.get(b"k"), d.get(b"seq"), d.get(b"sig")
    if b"v" not in d:
        raise KrpcError(PROTOCOL_ERROR, "missing v")
    if not isinstance(k, bytes) or len(k) != KEY_LEN:
        raise KrpcError(PROTOCOL_ERROR, "k must be a 32-byte string")
    if not isinstance(seq, int) or seq < 0:
        raise KrpcError(PROTOCOL_ERROR, "seq must be a non-negative integer")
    if not isinstance(sig, bytes) or len(sig) != SIG_LEN:
        raise KrpcError(PROTOCOL_ERROR, "sig must be a 64-byte string")
    v = bencode.encode(d[b"v"])
    if len(v) > MAX_V:
        raise KrpcError(MESSAGE_TOO_BIG, "message (v field) too big")
    if len(salt) > MAX_SALT:
        raise KrpcError(SALT_TOO_BIG, "salt (salt field) too big")
    item = MutableItem(k, salt, seq, v, sig)
    if not item.verify():
        raise KrpcError(INVALID_SIGNATURE, "invalid signature")
    return item


def put_item(a: dict[bytes, Any]) -> tuple[MutableItem, int | None]:
    """The item of a mutable put query's `a` and its `cas`; KrpcError on any fault."""
    salt = a.get(b"salt", b"")
    if not isinstance(salt, bytes):
        raise KrpcError(PROTOCOL_ERROR, "salt must be a string")
    if len(salt) > MAX_SALT:  # before the signature check: no work for an oversize salt
        raise KrpcError(SALT_TOO_BIG, "salt (salt field) too big")
    cas = a.get(b"cas")
    if cas is not None and not isinstance(cas, int):
        raise KrpcError(PROTOCOL_ERROR, "cas must be an integer")
    return item_from_fields(a, salt), cas


def check_replace(stored: MutableItem | None, new: MutableItem, cas: int | None) -> bool:
    """Whether `new` replaces `stored`: raises 301 (cas) or 302 (older seq).

    An equal seq is accepted and keeps what is stored (a refresh from another node).
    """
    if stored is None:
        return True
    if cas is not None and cas != stored.seq:
        raise KrpcError(CAS_MISMATCH, "CAS mismatch, re-read value and try again")
    if new.seq < stored.seq:
        raise KrpcError(SEQ_TOO_LOW, "sequence number less than current")
    return new.seq > stored.seq


class ItemStore:
    """Items by target, least recently written dropped first; at most `max_items`."""

    def __init__(self, max_items: int = 1000) -> None:
        self.max_items = max_items
        self.mutable: OrderedDict[bytes, MutableItem] = OrderedDict()
        self.immutable: OrderedDict[bytes, bytes] = OrderedDict()
        self.counters = {"stored": 0, "replaced": 0, "evicted": 0, "stale": 0}

    def __len__(self) -> int:
        return len(self.mutable) + len(self.immutable)

    def get_mutable(self, target: bytes) -> MutableItem | None:
        return self.mutable.get(target)

    def put_mutable(self, item: MutableItem, cas: int | None = None) -> bool:
        """Store item (checked by the caller); True when it is new or newer. Raises
        KrpcError 301/302 like `check_replace`."""
        target = item.target
        stored = self.mutable.get(target)
        try:
            newer = check_replace(stored, item, cas)
        except KrpcError:
            self.counters["stale"] += 1
            raise
        if newer:
            self.mutable[target] = item
            self.mutable.move_to_end(target)
            self.counters["replaced" if stored is not None else "stored"] += 1
            self._evict()
        return newer

    def put_immutable(self, v_bencoded: bytes) -> bytes:
        target = immutable_target(v_bencoded)
        self.immutable[target] = v_bencoded
        self.immutable.move_to_end(target)
        self.counters["stored"] += 1
        self._evict()
        return target

    def _evict(self) -> None:
        while len(self) > self.max_items:
            victim = self.immutable if self.immutable else self.mutable
            victim.popitem(last=False)
            self.counters["evicted"] += 1


class Tokens:
    """Write tokens: HMAC of the asker's IP under a secret rotated every 5 minutes; the
    previous secret is still accepted, so a token lives 5-10 minutes (as libtorrent)."""

    def __init__(self, rotate_s: float = TOKEN_ROTATE_S) -> None:
        self.rotate_s = rotate_s
        self._secrets = [os.urandom(16), os.urandom(16)]
        self._rotated = time.monotonic()

    def _maybe_rotate(self) -> None:
        now = time.monotonic()
        if now - self._rotated >= self.rotate_s:
            self._secrets = [os.urandom(16), self._secrets[0]]
            self._rotated = now

    def _token(self, secret: bytes, ip: str) -> bytes:
        return hmac.new(secret, ip.encode(), hashlib.sha1).digest()[:TOKEN_LEN]

    def make(self, ip: str) -> bytes:
        self._maybe_rotate()
        return self._token(self._secrets[0], ip)

    def check(self, ip: str, token: Any) -> bool:
        self._maybe_rotate()
        if not isinstance(token, bytes) or len(token) != TOKEN_LEN:
            return False
        return any(hmac.compare_digest(token, self._token(s, ip)) for s in self._secrets)
