# Tests of pubmote_wire.signature and verify: HMAC-SHA256 (RFC 4231), signers, SignatureInfo bytes.
from pubmote_wire import hmac256
from pubmote_wire import signature as sig
from pubmote_wire.compat import sha256
from pubmote_wire.errors import DecodeError
from pubmote_wire.tlv import TLVReader
from pubmote_wire.verify import equal, verify
from runner import hexs, raises, unhex

_AA = b"\xaa" * 131
# RFC 4231 test cases 1-4, 6 and 7 (case 5 is a truncated output): (key, data, HMAC).
RFC4231 = [
    (b"\x0b" * 20, b"Hi There",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 20, b"\xdd" * 50,
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
    (bytes(range(1, 26)), b"\xcd" * 50,
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
    (_AA, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    (_AA, b"This is a test using a larger than block-size key and a larger than block-size"
     b" data. The key needs to be hashed before being used by the HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]


def test_hmac_rfc4231():
    for key, data, want in RFC4231:
        assert hexs(hmac256.hmac_sha256(key, data)) == want
        # Chunked input and the signer over regions give the same value.
        assert hexs(hmac256.hmac_sha256(key, data[:3], data[3:])) == want
        buf = b"xx" + data + b"yy"
        s = hmac256.HmacSigner(key)
        n = len(data)
        assert hexs(s.sign(buf, (2, 5), (5, 2 + n))) == want
        assert hexs(s.sign2(memoryview(buf), 2, 2 + n, -1, -1)) == want
        assert verify(sig.HMAC_SHA256, unhex(want), buf, [(2, 2 + n)], key)
        assert not verify(sig.HMAC_SHA256, unhex(want), buf, [(2, 1 + n)], key)
        assert not verify(sig.HMAC_SHA256, unhex(want), buf, [(2, 2 + n)])


def test_digest_signer():
    s = sig.DigestSigner()
    assert s.sig_type == sig.DIGEST_SHA256 and s.sig_len == 32 and s.key_name is None
    buf = b"abcdef"
    d = s.sign(buf, (0, 2), (4, 6))
    assert d == sha256(b"abef").digest()
    assert verify(sig.DIGEST_SHA256, d, buf, [(0, 2), (4, 6)])
    assert not verify(sig.DIGEST_SHA256, d, buf, [(0, 6)])
    assert not verify(sig.ED25519, d, buf, [(0, 2), (4, 6)])
    assert not verify(sig.DIGEST_SHA256, None, buf, [(0, 2)])


def test_constants():
    assert (sig.DIGEST_SHA256, sig.SHA256_WITH_RSA, sig.SHA256_WITH_ECDSA) == (0, 1, 3)
    assert (sig.HMAC_SHA256, sig.ED25519) == (4, 5)


def test_equal():
    assert equal(b"abc", b"abc")
    assert not equal(b"abc", b"abd")
    assert not equal(b"abc", b"ab")


# (signer, interest, nonce, time, seq, expected SignatureInfo hex)
INFOS = [
    (sig.DigestSigner(), False, None, None, None, "16031b0100"),
    (sig.DigestSigner(), True, None, None, None, "2c031b0100"),
    (hmac256.HmacSigner(b"k", b"\x08\x01k"), False, None, None, None, "160a1b01041c05070308016b"),
    (sig.DigestSigner(), True, b"\x01\x02", 1000, 7, "2c0e1b010026020102280203e82a0107"),
    (sig.DigestSigner(), True, 0x0102, None, None, "2c071b010026020102"),
]


def test_signature_info_bytes_and_parse():
    class Obj:
        pass

    for s, interest, n, t, q, want in INFOS:
        typ = 0x2C if interest else 0x16
        size = s.info_size(interest, n, t, q)
        buf = bytearray(size + 1)
        assert s.write_info(buf, 1, typ, n, t, q) == size
        assert hexs(buf[1:]) == want
        o = Obj()
        o.sig_type = o.sig_key_name = o.sig_nonce = o.sig_time_ms = o.sig_seq = None
        sig.parse_info(o, TLVReader(b""), bytes(buf), 3, size + 1, True)
        assert o.sig_type == s.sig_type
        assert (o.sig_key_name is None) == (s.key_name is None)
        assert o.sig_time_ms == t and o.sig_seq == q


MALFORMED_INFO = [
    "",  # no SignatureType
    "1b",
    "1b0500",
    "1b0300",
    "1b01001c00",
    "1b01001c020800",
    "1b01001c03070108",
    "1b010031",
    "1b01000100",
]


def test_parse_info_malformed():
    class Obj:
        pass

    for hx in MALFORMED_INFO:
        o = Obj()
        o.sig_type = None
        b = unhex(hx)
        assert raises(DecodeError, sig.parse_info, o, TLVReader(b""), b, 0, len(b), True), hx


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_signature")
