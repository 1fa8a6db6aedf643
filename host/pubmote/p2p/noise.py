"""Noise_XX_25519_ChaChaPoly_SHA256 with the libp2p handshake payload, and the secured
session that runs over it (2-byte big-endian length framing, 65535-byte frames).

The handshake state machine is sans-IO (`HandshakeState`); `secure_outbound` and
`secure_inbound` drive it over a RawConn.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from pubmote.p2p.codec import pb_bytes, pb_decode, pb_get_bytes
from pubmote.p2p.errors import HandshakeError, ProtocolError
from pubmote.p2p.identity import KeyPair, PeerId, PublicKey
from pubmote.p2p.transport import RawConn

log = logging.getLogger(__name__)

PROTOCOL_ID = "/noise"
_NOISE_NAME = b"Noise_XX_25519_ChaChaPoly_SHA256"  # exactly 32 bytes: h starts as the name
_SIG_PREFIX = b"noise-libp2p-static-key:"
MAX_FRAME = 65535                       # the 2-byte length prefix allows no more
_TAG = 16
MAX_PLAINTEXT = MAX_FRAME - _TAG        # what one transport frame can carry
_MAX_NONCE = 2**64 - 1                  # Noise reserves the last nonce
_LEN = struct.Struct(">H")
_ZERO4 = b"\0\0\0\0"


def _hkdf2(ck: bytes, ikm: bytes) -> tuple[bytes, bytes]:
    """Noise's HKDF with two outputs (HMAC-SHA256)."""
    temp = hmac.digest(ck, ikm, "sha256")
    out1 = hmac.digest(temp, b"\x01", "sha256")
    out2 = hmac.digest(temp, out1 + b"\x02", "sha256")
    return out1, out2


class CipherState:
    """A ChaCha20-Poly1305 key with its 64-bit nonce counter."""

    __slots__ = ("_aead", "_n")

    def __init__(self, key: bytes) -> None:
        self._aead = ChaCha20Poly1305(key)
        self._n = 0

    def _nonce(self) -> bytes:
        if self._n >= _MAX_NONCE:
            raise ProtocolError("noise: nonce exhausted")
        nonce = _ZERO4 + self._n.to_bytes(8, "little")
        self._n += 1
        return nonce

    def encrypt(self, ad: bytes, plaintext: bytes | memoryview) -> bytes:
        return self._aead.encrypt(self._nonce(), plaintext, ad)

    def decrypt(self, ad: bytes, ciphertext: bytes) -> bytes:
        try:
            return self._aead.decrypt(self._nonce(), ciphertext, ad)
        except InvalidTag:
            raise ProtocolError("noise: decryption failed (bad tag)") from None


def _x25519_pub(priv: x25519.X25519PrivateKey) -> bytes:
    return priv.public_key().public_bytes(serialization.Encoding.Raw,
                                          serialization.PublicFormat.Raw)


def _dh(priv: x25519.X25519PrivateKey, pub: bytes) -> bytes:
    try:
        return priv.exchange(x25519.X25519PublicKey.from_public_bytes(pub))
    except ValueError as e:  # a low-order point gives an all-zero secret
        raise HandshakeError("noise: bad DH public key: %s" % e) from None


class HandshakeState:
    """The XX pattern for one side:  -> e;  <- e, ee, s, es;  -> s, se."""

    def __init__(self, initiator: bool, static: x25519.X25519PrivateKey | None = None,
                 ephemeral: x25519.X25519PrivateKey | None = None) -> None:
        self.initiator = initiator
        self.s = static or x25519.X25519PrivateKey.generate()
        self.s_pub = _x25519_pub(self.s)
        self.e = ephemeral or x25519.X25519PrivateKey.generate()
        self.e_pub = _x25519_pub(self.e)
        self.re = b""
        self.rs = b""
        self.h = _NOISE_NAME
        self.ck = _NOISE_NAME
        self.k: CipherState | None = None
        self._mix_hash(b"")  # empty prologue
        self.step = 0

    # -- symmetric state -----------------------------------------------------------------
    def _mix_hash(self, data: bytes) -> None:
        self.h = hashlib.sha256(self.h + data).digest()

    def _mix_key(self, ikm: bytes) -> None:
        self.ck, temp_k = _hkdf2(self.ck, ikm)
        self.k = CipherState(temp_k)

    def _encrypt_and_hash(self, plaintext: bytes) -> bytes:
        if self.k is None:
            out = plaintext
        else:
            out = self.k.encrypt(self.h, plaintext)
        self._mix_hash(out)
        return out

    def _decrypt_and_hash(self, ciphertext: bytes) -> bytes:
        if self.k is None:
            out = ciphertext
        else:
            try:
                out = self.k.decrypt(self.h, ciphertext)
            except ProtocolError:
                raise HandshakeError("noise: handshake decryption failed") from None
        self._mix_hash(ciphertext)
        return out

    # -- messages ------------------------------------------------------------------------
    def write_message(self, payload: bytes) -> bytes:
        if self.initiator and self.step == 0:
            self._mix_hash(self.e_pub)
            msg = self.e_pub + self._encrypt_and_hash(payload)
        elif not self.initiator and self.step == 1:
            self._mix_hash(self.e_pub)
            self._mix_key(_dh(self.e, self.re))                   # ee
            enc_s = self._encrypt_and_hash(self.s_pub)
            self._mix_key(_dh(self.s, self.re))                   # es
            msg = self.e_pub + enc_s + self._encrypt_and_hash(payload)
        elif self.initiator and self.step == 2:
            enc_s = self._encrypt_and_hash(self.s_pub)
            self._mix_key(_dh(self.s, self.re))                   # se
            msg = enc_s + self._encrypt_and_hash(payload)
        else:
            raise RuntimeError("noise: write_message out of turn")
        self.step += 1
        return msg

    def read_message(self, msg: bytes) -> bytes:
        if not self.initiator and self.step == 0:
            if len(msg) < 32:
                raise HandshakeError("noise: first message of %d bytes" % len(msg))
            self.re = msg[:32]
            self._mix_hash(self.re)
            payload = self._decrypt_and_hash(msg[32:])
        elif self.initiator and self.step == 1:
            if len(msg) < 32 + 48 + _TAG:
                raise HandshakeError("noise: second message of %d bytes" % len(msg))
            self.re = msg[:32]
            self._mix_hash(self.re)
            self._mix_key(_dh(self.e, self.re))                   # ee
            self.rs = self._decrypt_and_hash(msg[32:80])
            self._mix_key(_dh(self.e, self.rs))                   # es
            payload = self._decrypt_and_hash(msg[80:])
        elif not self.initiator and self.step == 2:
            if len(msg) < 48 + _TAG:
                raise HandshakeError("noise: third message of %d bytes" % len(msg))
            self.rs = self._decrypt_and_hash(msg[:48])
            self._mix_key(_dh(self.e, self.rs))                   # se
            payload = self._decrypt_and_hash(msg[48:])
        else:
            raise RuntimeError("noise: read_message out of turn")
        self.step += 1
        return payload

    def split(self) -> tuple[CipherState, CipherState]:
        """(send, receive) cipher states once the handshake is done."""
        k1, k2 = _hkdf2(self.ck, b"")
        c1, c2 = CipherState(k1), CipherState(k2)
        return (c1, c2) if self.initiator else (c2, c1)


# -- libp2p payload ------------------------------------------------------------------------


def make_payload(identity: KeyPair, static_pub: bytes) -> bytes:
    """NoiseHandshakePayload: identity_key=1, identity_sig=2 (extensions=4 not sent)."""
    sig = identity.sign(_SIG_PREFIX + static_pub)
    return pb_bytes(1, identity.public.encode()) + pb_bytes(2, sig)


def verify_payload(payload: bytes, remote_static: bytes,
                   expected: PeerId | None) -> tuple[PeerId, PublicKey]:
    """Check the remote's payload: its key signed its Noise static key; its PeerId is
    the one we dialed. Raises HandshakeError otherwise."""
    try:
        msg = pb_decode(payload)
        key_bytes = pb_get_bytes(msg, 1)
        sig = pb_get_bytes(msg, 2)
        if key_bytes is None or sig is None:
            raise HandshakeError("noise: payload without identity key or signature")
        key = PublicKey.decode(key_bytes)
    except HandshakeError:
        raise
    except ProtocolError as e:
        raise HandshakeError("noise: malformed payload: %s" % e) from None
    if not key.verify(sig, _SIG_PREFIX + remote_static):
        raise HandshakeError("noise: identity signature over the static key is invalid")
    peer = PeerId.from_public_key(key)
    if expected is not None and peer != expected:
        raise HandshakeError("noise: remote is %s, expected %s" % (peer, expected))
    return peer, key


# -- the secured session -------------------------------------------------------------------


class NoiseSession:
    """A secured connection: whole frames in, chunks of at most MAX_PLAINTEXT bytes out."""

    def __init__(self, raw: RawConn, send: CipherState, recv: CipherState,
                 remote_peer: PeerId, remote_key: PublicKey) -> None:
        self.raw = raw
        self._send = send
        self._recv = recv
        self.remote_peer = remote_peer
        self.remote_key = remote_key
        self._rbuf = b""
        self._reader = raw.reader
        self._writer = raw.writer

    async def read_frame(self) -> bytes:
        """Decrypt the next frame; IncompleteReadError at EOF, ProtocolError on tampering."""
        hdr = await self._reader.readexactly(2)
        n = (hdr[0] << 8) | hdr[1]
        if n < _TAG:
            raise ProtocolError("noise: frame of %d bytes is shorter than a tag" % n)
        ct = await self._reader.readexactly(n)
        return self._recv.decrypt(b"", ct)

    async def read_some(self) -> bytes:
        """Buffered bytes if any, else the next frame's plaintext."""
        if self._rbuf:
            data, self._rbuf = self._rbuf, b""
            return data
        return await self.read_frame()

    async def readexactly(self, n: int) -> bytes:
        while len(self._rbuf) < n:
            self._rbuf += await self.read_frame()
        data, self._rbuf = self._rbuf[:n], self._rbuf[n:]
        return data

    def write_nowait(self, data: bytes) -> None:
        """Encrypt and queue `data` (any size) without yielding: frames from concurrent
        writers never interleave."""
        if len(data) <= MAX_PLAINTEXT:
            ct = self._send.encrypt(b"", data)
            self._writer.write(_LEN.pack(len(ct)) + ct)
            return
        view = memoryview(data)
        out = []
        for off in range(0, len(data), MAX_PLAINTEXT):
            ct = self._send.encrypt(b"", view[off:off + MAX_PLAINTEXT])
            out.append(_LEN.pack(len(ct)))
            out.append(ct)
        self._writer.writelines(out)

    async def write(self, data: bytes) -> None:
        self.write_nowait(data)
        await self._writer.drain()

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self.raw.close()

    def abort(self) -> None:
        self.raw.abort()


async def _read_hs(raw: RawConn) -> bytes:
    hdr = await raw.readexactly(2)
    return await raw.readexactly((hdr[0] << 8) | hdr[1])


async def _write_hs(raw: RawConn, msg: bytes) -> None:
    if len(msg) > MAX_FRAME:
        raise HandshakeError("noise: handshake message too large")
    await raw.write(_LEN.pack(len(msg)) + msg)


async def secure_outbound(raw: RawConn, identity: KeyPair,
                          expected: PeerId | None) -> NoiseSession:
    """Run the handshake as initiator; the remote must be `expected` when given."""
    hs = HandshakeState(True)
    await _write_hs(raw, hs.write_message(b""))
    payload = hs.read_message(await _read_hs(raw))
    peer, key = verify_payload(payload, hs.rs, expected)
    await _write_hs(raw, hs.write_message(make_payload(identity, hs.s_pub)))
    send, recv = hs.split()
    return NoiseSession(raw, send, recv, peer, key)


async def secure_inbound(raw: RawConn, identity: KeyPair) -> NoiseSession:
    """Run the handshake as responder."""
    hs = HandshakeState(False)
    hs.read_message(await _read_hs(raw))  # the initiator's first payload is ignored
    await _write_hs(raw, hs.write_message(make_payload(identity, hs.s_pub)))
    payload = hs.read_message(await _read_hs(raw))
    peer, key = verify_payload(payload, hs.rs, None)
    send, recv = hs.split()
    return NoiseSession(raw, send, recv, peer, key)


