# Tests of pubmote_wire.interest: exact bytes, round trips, digests, signatures, bad input.
# unix-heap: 96k (it compiles interest.py, the largest codec module, from source on a 64-bit heap)
import vectors
from pubmote_wire import interest as ii
from pubmote_wire.errors import DecodeError, EncodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.signature import DigestSigner
from runner import hexs, raises, unhex

AB = unhex("080161080162")  # /a/b
KEY = b"secret"

# (kwargs, expected hex) for unsigned Interests with every field.
EXACT = [
    ({}, "0508" + "0706" + "080161080162"),
    ({"can_be_prefix": True, "must_be_fresh": True}, "050c0706080161080162" + "2100" + "1200"),
    ({"nonce": 0x01020304, "lifetime_ms": 4000, "hop_limit": 9},
     "05150706080161080162" + "0a0401020304" + "0c020fa0" + "220109"),
    ({"forwarding_hint": [unhex("080178")]}, "050f0706080161080162" + "1e05" + "0703080178"),
]


def test_exact_unsigned():
    for kw, want in EXACT:
        assert hexs(ii.encode(AB, **kw)) == want
        assert ii.interest_size(AB, **kw) == len(want) // 2


def test_app_params_digest_and_roundtrip():
    w = ii.encode(AB, nonce=1, app_params=b"xyz")
    i = ii.decode_interest(w)
    assert bytes(i.app_params) == b"xyz" and i.params_digest_ok
    assert bytes(i.name[:6]) == AB and bytes(i.name[6:8]) == b"\x02\x20"
    assert i.sig_type is None and i.signed_regions is None
    # A digest already in the name is replaced, not doubled.
    assert ii.encode(bytes(i.name), nonce=1, app_params=b"xyz") == w
    assert ii.encode(AB, app_params=b"") != ii.encode(AB)


def test_roundtrip_fields_into():
    into = ii.Interest()
    fh = [unhex("080178"), unhex("080179")]
    w = ii.encode(AB, can_be_prefix=True, must_be_fresh=True, forwarding_hint=fh,
                  nonce=0xFFFFFFFF, lifetime_ms=70000, hop_limit=255)
    for buf in (w, bytearray(w), memoryview(w)):
        i = ii.decode_interest(buf, into)
        assert i is into
        assert bytes(i.name) == AB and i.can_be_prefix and i.must_be_fresh
        assert [bytes(f) for f in i.forwarding_hint] == fh
        assert i.nonce == 0xFFFFFFFF and i.lifetime_ms == 70000 and i.hop_limit == 255
        assert i.app_params is None and not i.params_digest_ok
    i = ii.decode_interest(ii.encode(AB), into)  # into is reset between packets
    assert not i.can_be_prefix and i.forwarding_hint is None and i.nonce is None


def test_signed_digest_and_hmac():
    for signer, key in ((DigestSigner(), None), (HmacSigner(KEY, AB), KEY)):
        w = ii.encode(AB, nonce=5, app_params=b"p", signer=signer, sig_nonce=b"\x01\x02",
                      sig_time_ms=1234, sig_seq=3)
        i = ii.decode_interest(w)
        assert i.sig_type == signer.sig_type and len(i.sig_value) == 32
        assert bytes(i.sig_nonce) == b"\x01\x02" and i.sig_time_ms == 1234 and i.sig_seq == 3
        assert ii.verify_interest(i, w, key)
        if key is not None:
            assert bytes(i.sig_key_name) == AB
            assert not ii.verify_interest(i, w, b"other")
        # Flip one byte of the name: the digest still matches, the signature must not.
        bad = bytearray(w)
        bad[6] ^= 1
        assert not ii.verify_interest(ii.decode_interest(bad), bad, key)
    # A signer without app_params adds empty ApplicationParameters (python-ndn does too).
    i = ii.decode_interest(ii.encode(AB, signer=DigestSigner()))
    assert bytes(i.app_params) == b"" and ii.verify_interest(i, ii.encode(AB, signer=DigestSigner()))


def test_encode_into_buffer():
    buf = bytearray(100)
    n = ii.encode_interest(buf, 3, AB, nonce=7, app_params=b"q", signer=DigestSigner())
    assert bytes(buf[3 : 3 + n]) == ii.encode(AB, nonce=7, app_params=b"q", signer=DigestSigner())
    assert raises(EncodeError, lambda: ii.encode_interest(bytearray(10), 0, AB, nonce=1))
    assert raises(EncodeError, lambda: ii.encode(AB, nonce=1 << 32))
    assert raises(EncodeError, lambda: ii.encode(AB, hop_limit=256))


def _pkt(*parts):
    v = unhex("".join(parts))
    return bytes((5, len(v))) + v


def test_unknown_elements():
    base = "0706080161080162"
    # A non-critical unknown element (even, > 31) is skipped anywhere after the Name.
    assert ii.decode_interest(_pkt(base, "fd00fe00", "0a0401020304")).nonce == 0x01020304
    assert ii.decode_interest(_pkt(base, "0a0401020304", "fd00fe0100")).nonce == 0x01020304
    # Critical unknown ones (odd, or <= 31) are errors.
    for extra in ("fd00ff00", "0300", "1000", "3100"):
        assert raises(DecodeError, ii.decode_interest, _pkt(base, extra)), extra
    # Out of order or repeated: a non-critical known element is ignored, critical rejected.
    assert ii.decode_interest(_pkt(base, "220105", "220106")).hop_limit == 5
    assert raises(DecodeError, ii.decode_interest, _pkt(base, "0a0401020304", "2100"))
    assert raises(DecodeError, ii.decode_interest, _pkt(base, "0c020fa0", "0a0401020304"))
    assert raises(DecodeError, ii.decode_interest, _pkt(base, base))


def test_params_digest_checks():
    w = bytearray(ii.encode(AB, app_params=b"xyz"))
    w[-1] ^= 1  # the app params change: digest mismatch
    assert raises(DecodeError, ii.decode_interest, w)
    # Digest without ApplicationParameters, parameters without digest.
    assert raises(DecodeError, ii.decode_interest, unhex("0524" + "0722" + "0220" + "00" * 32))
    assert raises(DecodeError, ii.decode_interest, unhex("050a" + "0706080161080162" + "2400"))
    # Signature value without info.
    assert raises(DecodeError, ii.decode_interest, unhex("050a07060801610801622e00"))


MALFORMED = [
    "",  # empty input
    "05",  # truncated header
    "0500",  # no Name
    "0600",  # a Data
    "0501",  # length past end
    "050207",  # truncated Name
    "0503080100",  # does not start with a Name
    "050407020805",  # component past the Name's end
    "050407020001",  # component type 0
    "05040702fdff",  # truncated component type
    "050a0706080161080162",  # length longer than input
    "0508070600020000000000",  # short params digest
    "050407000a00",  # Nonce of 0 bytes
    "0506070022020a0b",  # HopLimit of 2 bytes
    "050707000c03000000",  # lifetime of 3 bytes
    "05060700" + "1e020800",  # forwarding hint with a critical non-Name
    "0509070024002c031b0100",  # signature info without value
    "050807002400" + "2c02" + "2600",  # signature info without type
]


def test_malformed_table():
    for hx in MALFORMED:
        assert raises(DecodeError, ii.decode_interest, unhex(hx)), hx


def test_packet_type_constant():
    # the codec names the Interest's TLV type, and decodes only that type as an Interest
    assert ii.INTEREST == 0x05
    for kw in ({}, {"nonce": 1}, {"app_params": b"p"}, {"signer": DigestSigner()}):
        w = ii.encode(AB, **kw)
        assert w[0] == ii.INTEREST
        assert raises(DecodeError, ii.decode_interest, bytes([ii.INTEREST + 1]) + w[1:])


def test_where_the_parts_are():
    # the decoded Interest says where its parts are in the input (-1: absent), so its
    # signature and digest are checked in place
    i = ii.decode_interest(ii.encode(AB, nonce=1))
    w = ii.encode(AB, nonce=1)
    assert bytes(w[i.name_start : i.name_end]) == AB
    assert (i.digest_at, i.params_at, i.signed_end) == (-1, -1, -1)
    for kw in ({"app_params": b"pp"}, {"signer": DigestSigner(), "app_params": b"q"},
               {"signer": HmacSigner(KEY, AB)}):
        w = ii.encode(AB, nonce=1, **kw)
        i = ii.decode_interest(w)
        assert bytes(w[i.name_start : i.digest_at]) == AB
        assert w[i.digest_at] == 2 and w[i.digest_at + 1] == 32 and i.digest_at + 34 == i.name_end
        assert w[i.params_at] == 0x24
        if "signer" in kw:
            assert w[i.signed_end] == 0x2E  # InterestSignatureValue follows
        else:
            assert i.signed_end == -1


def test_truncations_of_vectors():
    v = vectors.ndn_notify()
    for label in ("notify Interest", "msg Interest"):
        w = v[label]
        ii.decode_interest(w)
        for n in range(len(w)):
            assert raises(DecodeError, ii.decode_interest, w[:n])
        assert raises(DecodeError, ii.decode_interest, w + b"\x00")


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_interest")
