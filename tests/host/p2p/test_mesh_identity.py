"""Mesh identity and codecs: base58, varints, protobuf, keys, PeerIds, key file, multiaddrs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from pubmote.p2p.codec import (
    b58decode,
    b58encode,
    decode_uvarint,
    encode_uvarint,
    pb_decode,
)
from pubmote.p2p.errors import ProtocolError
from pubmote.p2p.identity import (
    KEY_ECDSA,
    KEY_RSA,
    KEY_SECP256K1,
    KeyPair,
    PeerId,
    PublicKey,
    load_or_create_key,
)
from pubmote.p2p.multiaddr import Multiaddr

# Computed by js-libp2p (@libp2p/crypto 5, @libp2p/peer-id 6) from the seed 00 01 .. 1f.
SEED = bytes(range(32))
VEC_PEER = "12D3KooWA4Xop1JaT3MHxwYMkCepYsv4iPVopMXwCz5iHYdBfeSB"
VEC_PUB = "0801122003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
VEC_PRIV = ("08011240" + SEED.hex() + "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8")


@pytest.mark.parametrize("raw,text", [
    (b"", ""), (b"\0", "1"), (b"\0\0\x01", "112"), (b"hello world", "StV1DL6CwTryKyV"),
    (bytes.fromhex("0000287fb4cd"), "11233QC4"),
])
def test_base58(raw: bytes, text: str) -> None:
    assert b58encode(raw) == text
    assert b58decode(text) == raw


@pytest.mark.parametrize("bad", ["0", "O", "I", "l", "abc!", "x" * 300])
def test_base58_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        b58decode(bad)


@pytest.mark.parametrize("value,enc", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"),
    (16384, "808001"), (2**63 - 1, "ffffffffffffffff7f"),
])
def test_uvarint(value: int, enc: str) -> None:
    assert encode_uvarint(value).hex() == enc
    assert decode_uvarint(bytes.fromhex(enc)) == (value, len(enc) // 2)


@pytest.mark.parametrize("bad", ["", "80", "ffffffffffffffffff01", "8000", "ff"])
def test_uvarint_malformed(bad: str) -> None:
    with pytest.raises(ProtocolError):
        decode_uvarint(bytes.fromhex(bad))


@pytest.mark.parametrize("bad", [
    "0a05abcd",          # length beyond input
    "0b",                # wire type 3 (group)
    "00",                # field 0
    "08",                # truncated varint value
    "0d0102",            # truncated fixed32
    "0aff",              # truncated length
])
def test_protobuf_malformed(bad: str) -> None:
    with pytest.raises(ProtocolError):
        pb_decode(bytes.fromhex(bad))


def test_peer_id_vector_from_js_libp2p() -> None:
    key = KeyPair.from_seed(SEED)
    assert key.public.encode().hex() == VEC_PUB
    assert key.encode_private().hex() == VEC_PRIV
    assert str(key.peer_id) == VEC_PEER
    pid = PeerId.from_base58(VEC_PEER)
    assert pid == key.peer_id and pid.inline_key() == key.public
    assert KeyPair.decode_private(bytes.fromhex(VEC_PRIV)).peer_id == pid


def test_signatures_of_every_key_type() -> None:
    msg = b"noise-libp2p-static-key:" + bytes(32)
    k = KeyPair.generate()
    assert k.public.verify(k.sign(msg), msg)
    assert not k.public.verify(k.sign(msg), msg + b"x")
    assert not k.public.verify(b"short", msg)
    # secp256k1 (compressed point), ECDSA (PKIX), RSA (PKIX): verify only
    sk = ec.generate_private_key(ec.SECP256K1())
    pub = sk.public_key().public_bytes(serialization.Encoding.X962,
                                       serialization.PublicFormat.CompressedPoint)
    secp = PublicKey(KEY_SECP256K1, pub)
    assert secp.verify(sk.sign(msg, ec.ECDSA(hashes.SHA256())), msg)
    assert PeerId.from_public_key(secp).to_base58().startswith("16U")
    p256 = ec.generate_private_key(ec.SECP256R1())
    der = p256.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    assert PublicKey(KEY_ECDSA, der).verify(p256.sign(msg, ec.ECDSA(hashes.SHA256())), msg)
    rk = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rder = rk.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    rpub = PublicKey(KEY_RSA, rder)
    assert rpub.verify(rk.sign(msg, padding.PKCS1v15(), hashes.SHA256()), msg)
    rid = PeerId.from_public_key(rpub)
    assert rid.to_base58().startswith("Qm") and rid.inline_key() is None and rid.matches(rpub)


@pytest.mark.parametrize("bad", [
    "", "0801", "08011210" + "00" * 16, "0809122000" + "00" * 31, "1220" + "00" * 32,
])
def test_public_key_malformed(bad: str) -> None:
    with pytest.raises(ProtocolError):
        PublicKey.decode(bytes.fromhex(bad))


@pytest.mark.parametrize("bad", ["", "Qm", "12D3KooW", "hello", "1" * 40])
def test_peer_id_text_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        PeerId.from_base58(bad)


def test_key_file_created_0600_and_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mesh.key"
    with pytest.raises(ValueError, match="does not exist"):
        load_or_create_key(path)  # a folder that is not there is a typo: nothing made
    assert not path.parent.exists()
    k1 = load_or_create_key(path, make_dirs=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    k2 = load_or_create_key(path)
    assert k1.peer_id == k2.peer_id
    with pytest.raises(FileNotFoundError):
        load_or_create_key(tmp_path / "missing", create=False)


def test_key_file_refused_when_unsafe_or_malformed(tmp_path: Path) -> None:
    path = tmp_path / "mesh.key"
    load_or_create_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        load_or_create_key(path)
    for junk in (b"", b"\x08\x02\x12\x20" + bytes(32), b"\xff" * 10, b"x" * 5000):
        path.write_bytes(junk)
        os.chmod(path, 0o600)
        with pytest.raises(ValueError):
            load_or_create_key(path)


@pytest.mark.parametrize("text,hexenc", [
    ("/ip4/127.0.0.1/tcp/4001", "047f000001060fa1"),
    ("/ip6/::1/tcp/4001", "29" + "00" * 15 + "01" + "060fa1"),
    ("/ip4/1.2.3.4/udp/53/quic-v1", "0401020304910200" + "35" + "cd03"),
    ("/dns4/example.com/tcp/443", "360b6578616d706c652e636f6d0601bb"),
    ("/ip4/127.0.0.1/tcp/1/p2p/" + VEC_PEER,
     "047f0000010600" + "01" + "a503" + "26" + "0024" + VEC_PUB),
])
def test_multiaddr_vectors(text: str, hexenc: str) -> None:
    ma = Multiaddr(text)
    assert ma.to_bytes().hex() == hexenc.replace(" ", "")
    assert Multiaddr.from_bytes(ma.to_bytes()) == ma
    assert str(ma) == text


def test_multiaddr_helpers() -> None:
    ma = Multiaddr("/ip4/127.0.0.1/tcp/4001/p2p/" + VEC_PEER)
    assert ma.tcp_host_port() == ("127.0.0.1", 4001)
    assert ma.peer_id_text() == VEC_PEER
    assert str(ma.without_p2p()) == "/ip4/127.0.0.1/tcp/4001"
    assert Multiaddr("/ipfs/" + VEC_PEER).peer_id_text() == VEC_PEER
    with pytest.raises(ValueError):
        Multiaddr("/ip4/127.0.0.1/udp/1").tcp_host_port()


@pytest.mark.parametrize("bad", ["ip4/1.2.3.4", "/ip4/999.1.1.1", "/tcp/70000", "/foo/1",
                                 "/ip4", "/p2p/0OIl"])
def test_multiaddr_text_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        Multiaddr(bad)


@pytest.mark.parametrize("bad", ["04", "047f00", "ff7f", "a503ff", "0601", "a503" + "05" + "00"])
def test_multiaddr_bytes_malformed(bad: str) -> None:
    with pytest.raises(ProtocolError):
        Multiaddr.from_bytes(bytes.fromhex(bad))
