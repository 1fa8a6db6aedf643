# Tests of pubmote_wire.data: exact bytes, MetaInfo, round trips, signatures, bad input.
import vectors
from pubmote_wire import data as dd
from pubmote_wire.errors import DecodeError, EncodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.signature import HMAC_SHA256
from runner import hexs, raises, unhex

AB = unhex("080161080162")  # /a/b
KEY = b"k"


def _sha(b):
    from pubmote_wire.compat import sha256

    return hexs(sha256(b).digest())


def test_exact_minimal_and_meta():
    w = dd.encode(AB)
    body = "0706080161080162" + "16031b0100"
    assert hexs(w) == "062f" + body + "1720" + _sha(unhex(body))
    # content_type=0 written explicitly, as python-ndn does.
    w = dd.encode(AB, b"hi", content_type=0)
    body = "0706080161080162" + "1403180100" + "15026869" + "16031b0100"
    assert hexs(w) == "0638" + body + "1720" + _sha(unhex(body))
    assert dd.data_size(AB, b"hi", content_type=0) == len(w)


def test_roundtrip_fields_into():
    into = dd.Data()
    fbi = unhex("320105")
    w = dd.encode(AB, b"x" * 300, content_type=2, freshness_ms=1000, final_block_id=fbi)
    for buf in (w, bytearray(w), memoryview(w)):
        d = dd.decode_data(buf, into)
        assert d is into and bytes(d.name) == AB and bytes(d.content) == b"x" * 300
        assert d.content_type == 2 and d.freshness_ms == 1000 and bytes(d.final_block_id) == fbi
        assert d.sig_type == 0 and dd.verify_data(d, buf)
    d = dd.decode_data(dd.encode(AB), into)  # into is reset between packets
    assert d.content is None and d.content_type is None and d.final_block_id is None
    assert bytes(dd.decode_data(dd.encode(AB, b"")).content) == b""


def test_hmac_signed():
    w = dd.encode(AB, b"c", signer=HmacSigner(KEY, AB))
    d = dd.decode_data(w)
    assert d.sig_type == HMAC_SHA256 and bytes(d.sig_key_name) == AB
    assert dd.verify_data(d, w, KEY) and not dd.verify_data(d, w, b"j")
    assert not dd.verify_data(d, w)
    bad = bytearray(w)
    bad[-40] ^= 1  # inside the signed part
    assert not dd.verify_data(dd.decode_data(bad), bad, KEY)


def test_encode_into_buffer():
    buf = bytearray(200)
    n = dd.encode_data(buf, 5, AB, b"z", freshness_ms=0)
    assert bytes(buf[5 : 5 + n]) == dd.encode(AB, b"z", freshness_ms=0)
    assert raises(EncodeError, dd.encode_data, bytearray(20), 0, AB)


def _pkt(*parts):
    v = unhex("".join(parts))
    return bytes((6, len(v))) + v


SIG = "16031b0100" + "1700"


def test_unknown_elements():
    d = dd.decode_data(_pkt("0700", "fd00fe00", "15016b", SIG))
    assert bytes(d.content) == b"k"
    for extra in ("fd00ff00", "0300", "1000"):
        assert raises(DecodeError, dd.decode_data, _pkt("0700", extra, SIG)), extra
    # Unknown critical MetaInfo element; an unknown critical SignatureInfo one is skipped
    # (python-ndn does the same for v0.2 Data).
    assert raises(DecodeError, dd.decode_data, _pkt("0700", "14021d00", SIG))
    assert dd.decode_data(_pkt("0700", "16051b01000300", "1700")).sig_type == 0
    # Out of order: critical known elements after the signature are rejected.
    assert raises(DecodeError, dd.decode_data, _pkt("0700", SIG, "15016b"))


MALFORMED = [
    "",  # empty input
    "06",  # truncated header
    "0600",  # no Name
    "0500",  # an Interest
    "0601",  # length past end
    "06020800",  # not starting with a Name
    "06020700",  # no signature
]
# Whole packets from TLV parts, each with one fault.
BAD_PARTS = [
    ("0700", "16031b0100"),  # no SignatureValue
    ("0700", "1700"),  # no SignatureInfo
    ("0700", "1400", "1600", "1700"),  # SignatureInfo without type
    ("0700", "14031a0100", SIG),  # FinalBlockId with a type-0 component
    ("0700", "1405180300" + "0000", SIG),  # ContentType of 3 bytes
    ("07020001", SIG),  # bad name component
    ("0700", "16051b01001c00", "1700"),  # empty KeyLocator
    ("0700", "16071b01001c020800", "1700"),  # KeyLocator with a generic component
    ("0700", "14041a020801", SIG),  # FinalBlockId component runs past its end
]


def test_malformed_table():
    for hx in MALFORMED:
        assert raises(DecodeError, dd.decode_data, unhex(hx)), hx
    for parts in BAD_PARTS:
        assert raises(DecodeError, dd.decode_data, _pkt(*parts)), parts


def test_truncations_of_vectors():
    v = vectors.ndn_notify()
    for label in ("msg Data", "notify ack Data"):
        w = v[label]
        dd.decode_data(w)
        for n in range(len(w)):
            assert raises(DecodeError, dd.decode_data, w[:n])
        assert raises(DecodeError, dd.decode_data, w + b"\x00")


def test_packet_type_constant():
    # the codec names the Data's TLV type, and decodes only that type as a Data
    assert dd.DATA == 0x06
    for content in (None, b"", b"x" * 300):
        w = dd.encode(b"\x08\x01a", content)
        assert w[0] == dd.DATA
        assert raises(DecodeError, dd.decode_data, bytes([dd.DATA - 1]) + w[1:])


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_data")
