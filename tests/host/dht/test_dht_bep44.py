"""BEP 44: the BEP's published test vectors (key, signed buffers, signatures, targets),
the libtorrent capture in tests/vectors/bep44_krpc.json, and the put checks with BEP 44's
error codes (205, 206, 207, 301, 302), bounded storage and write tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pubmote.dht import bencode, bep44, ed25519, krpc
from pubmote.dht.krpc import KrpcError

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "bep44_krpc.json"
# BEP 44, "Test vectors": the key pair (expanded secret, as the BEP prints it)
BEP_SECRET = bytes.fromhex(
    "e06d3183d14159228433ed599221b80bd0a5ce8352e4bdf0262f76786ef1c74d"
    "b7e7a9fea2c0eb269d61e3b38e450a22e754941ac78479d6c54e1faf6037881d")
BEP_PUBLIC = bytes.fromhex("77ff84905a91936367c01360803104f92432fcd904a43511876df5cdf3e7e548")
VALUE = b"Hello World!"
BEP_TESTS = [
    # (salt, signed buffer, signature, target)
    (b"", b"3:seqi1e1:v12:Hello World!",
     "305ac8aeb6c9c151fa120f120ea2cfb923564e11552d06a5d856091e5e853cff"
     "1260d3f39e4999684aa92eb73ffd136e6f4f3ecbfda0ce53a1608ecd7ae21f01",
     "4a533d47ec9c7d95b1ad75f576cffc641853b750"),
    (b"foobar", b"4:salt6:foobar3:seqi1e1:v12:Hello World!",
     "6834284b6b24c3204eb2fea824d82f88883a3d95e8b4a21b8c0ded553d17d17d"
     "df9a8a7104b1258f30bed3787e6cb896fca78c58f8e03b5f18f14951a87d9a08",
     "411eba73b6f087ca51a3795d9c8c938d365e32c1"),
]


def packets() -> dict[str, bytes]:
    data = json.loads(VECTORS.read_text())
    return {k: bytes.fromhex(v["hex"]) for k, v in data["packets"].items()}


@pytest.mark.parametrize(("salt", "buf", "sig", "target"), BEP_TESTS)
def test_bep44_published_mutable_vectors(salt: bytes, buf: bytes, sig: str, target: str) -> None:
    kp = bep44.KeyPair(BEP_SECRET)
    assert kp.public == BEP_PUBLIC
    assert bep44.signed_buffer(salt, 1, bencode.encode(VALUE)) == buf
    item = bep44.sign_item(kp, VALUE, 1, salt)
    assert item.sig.hex() == sig  # ed25519 is deterministic: the same bytes as the BEP
    assert item.target.hex() == target
    assert bep44.verify(BEP_PUBLIC, bytes.fromhex(sig), buf)


def test_bep44_published_immutable_vector() -> None:
    assert bep44.immutable_target(b"12:Hello World!").hex() == (
        "e5f96f6f38320f0f33959cb4d3d656452117aadb")


def test_libtorrent_put_capture_reproduced() -> None:
    p = packets()
    msg = krpc.parse(p["put_query_seq1"])
    assert (msg.kind, msg.method, msg.version) == (b"q", b"put", b"LT\x02\x11")
    item, cas = bep44.put_item(msg.args)
    assert cas is None and item.key == BEP_PUBLIC and item.salt == b"foobar" and item.seq == 1
    assert item.value() == VALUE
    # our signature and our encoding of the same query are libtorrent's, byte for byte
    ours = bep44.sign_item(bep44.KeyPair(BEP_SECRET), VALUE, 1, b"foobar")
    assert ours.sig == item.sig
    again = krpc.encode_query(msg.tid, b"put", ours.put_args(msg.args[b"id"],
                                                            msg.args[b"token"]),
                              version=b"LT\x02\x11")
    assert again == p["put_query_seq1"]
    resp = krpc.parse(p["put_response"])
    assert resp.kind == b"r" and resp.tid == msg.tid
    assert krpc.parse_peer(resp.ip or b"") == ("127.0.0.1", 0x9979)
    assert krpc.encode_response(resp.tid, resp.args, version=resp.version,
                                ip=("127.0.0.1", 0x9979)) == p["put_response"]


def test_seed_and_expanded_keys_sign_alike() -> None:
    seed = bytes(range(32))
    a, b = bep44.KeyPair(seed), bep44.KeyPair(ed25519.expand_seed(seed))
    assert a.public == b.public
    assert a.sign(b"msg") == b.sign(b"msg")
    with pytest.raises(ValueError):
        bep44.KeyPair(b"short")


def test_key_file_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "dht.key"
    kp = bep44.KeyPair.load(f, create=True)
    assert (f.stat().st_mode & 0o777) == 0o600
    assert bep44.KeyPair.load(f).public == kp.public
    f.write_text("not hex\n")
    with pytest.raises(ValueError):
        bep44.KeyPair.load(f)


def _args(item: bep44.MutableItem, **extra: Any) -> dict[bytes, Any]:
    a = item.put_args(b"\x01" * 20, b"tok")
    for k, v in extra.items():
        a[k.encode()] = v
    return a


def _code(fn: Any, *args: Any) -> int:
    with pytest.raises(KrpcError) as e:
        fn(*args)
    return e.value.code


def test_put_checks_give_bep44_codes() -> None:
    kp = bep44.KeyPair.generate()
    good = bep44.sign_item(kp, b"v", 5, b"s")
    item, cas = bep44.put_item(_args(good))
    assert item.seq == 5 and cas is None
    # 205: v over 1000 bytes (996-byte string bencodes to 1000; 997 to 1001)
    assert bep44.sign_item(kp, b"x" * 996, 1)
    with pytest.raises(ValueError):
        bep44.sign_item(kp, b"x" * 997, 1)
    big = _args(good, v=b"x" * 997)
    assert _code(bep44.put_item, big) == krpc.MESSAGE_TOO_BIG
    # 207: salt over 64 bytes, refused before any signature work
    assert _code(bep44.put_item, _args(good, salt=b"s" * 65)) == krpc.SALT_TOO_BIG
    with pytest.raises(ValueError):
        bep44.sign_item(kp, b"v", 1, b"s" * 65)
    # 206: a signature that does not verify (tampered v, seq, salt or key)
    for tamper in ({"v": b"w"}, {"seq": 6}, {"salt": b"t"},
                   {"k": bep44.KeyPair.generate().public},
                   {"sig": bytes(64)}):
        assert _code(bep44.put_item, _args(good, **tamper)) == krpc.INVALID_SIGNATURE
    # 203: wrong types
    for bad in ({"k": b"short"}, {"seq": -1}, {"seq": b"1"}, {"sig": b"x"}, {"salt": 5},
                {"cas": b"1"}):
        assert _code(bep44.put_item, _args(good, **bad)) == krpc.PROTOCOL_ERROR
    no_v = _args(good)
    del no_v[b"v"]
    assert _code(bep44.put_item, no_v) == krpc.PROTOCOL_ERROR


def test_store_seq_and_cas() -> None:
    kp = bep44.KeyPair.generate()
    store = bep44.ItemStore(max_items=10)
    i5, i6, i4 = (bep44.sign_item(kp, b"v%d" % s, s) for s in (5, 6, 4))
    assert store.put_mutable(i5)
    assert not store.put_mutable(i5)  # the same seq again: kept, not an error
    assert _code(store.put_mutable, i4) == krpc.SEQ_TOO_LOW
    assert _code(store.put_mutable, i6, 4) == krpc.CAS_MISMATCH
    assert store.put_mutable(i6, 5)
    assert store.get_mutable(i6.target) is i6
    assert store.counters["stale"] == 2


def test_store_is_bounded() -> None:
    kp = bep44.KeyPair.generate()
    store = bep44.ItemStore(max_items=5)
    for n in range(20):
        store.put_mutable(bep44.sign_item(kp, b"v", 1, b"salt%d" % n))
        store.put_immutable(b"i%de" % n)
    assert len(store) == 5
    assert store.counters["evicted"] == 35


def test_tokens() -> None:
    t = bep44.Tokens(rotate_s=1000)
    tok = t.make("10.0.0.1")
    assert t.check("10.0.0.1", tok)
    assert not t.check("10.0.0.2", tok)
    assert not t.check("10.0.0.1", b"x" * 8)
    assert not t.check("10.0.0.1", None)

    def rotate() -> None:
        t.rotate_s = 0.0
        t.make("10.0.0.9")
        t.rotate_s = 1000

    rotate()  # the previous secret still counts: a token lives one to two periods
    assert t.check("10.0.0.1", tok)
    rotate()
    assert not t.check("10.0.0.1", tok)


def test_rfc8032_vector_1_with_both_signers() -> None:
    # RFC 8032 section 7.1, TEST 1 (empty message)
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    pub = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    sig = ("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
           "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    expanded = ed25519.expand_seed(seed)
    assert ed25519.public_key(expanded).hex() == pub
    assert ed25519.sign(expanded, b"").hex() == sig
    assert bep44.KeyPair(seed).sign(b"").hex() == sig
