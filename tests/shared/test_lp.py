# Tests of pubmote_wire.lp: exact LpPacket bytes, Nack, unknown-field rule, malformed input,
# indexed fragmentation and the bounded Reassembler.
from pubmote_wire import lp
from pubmote_wire.errors import DecodeError, EncodeError
from runner import raises, unhex

FRAG = unhex("aabbcc")

# (kwargs, fragment, hex)
EXACT = [
    ({}, FRAG, "6405 5003aabbcc"),
    ({}, None, "6400"),
    ({"sequence": 1, "frag_index": 0, "frag_count": 2}, FRAG,
     "6415 51080000000000000001 520100 530102 5003aabbcc"),
    ({"nack_reason": lp.NACK_NO_ROUTE}, FRAG, "640e fd032005fd03210196 5003aabbcc"),
    ({"nack_reason": lp.NACK_NONE}, FRAG, "640e fd032005fd03210100 5003aabbcc"),
    ({"nack_reason": lp.NACK_NO_ELEMENT}, FRAG, "6409 fd032000 5003aabbcc"),
    ({"pit_token": unhex("01020304")}, FRAG, "640b 620401020304 5003aabbcc"),
    ({"incoming_face_id": 300, "next_hop_face_id": 1}, None, "640b fd03300101 fd033102012c"),
    ({"congestion_mark": 1}, FRAG, "640a fd03400101 5003aabbcc"),
    ({"tx_sequence": 0x0102030405060708, "acks": [1, 2]}, None,
     "6424 fd0344080000000000000001 fd0344080000000000000002 fd0348080102030405060708"),
]


def test_exact_bytes_and_decode():
    buf = bytearray(64)
    for kw, frag, hx in EXACT:
        want = unhex(hx)
        assert lp.encode(frag, **kw) == want, hx
        assert lp.lp_size(frag, **kw) == len(want)
        assert lp.encode_lp(buf, 1, frag, **kw) == len(want)
        assert bytes(buf[1 : 1 + len(want)]) == want
        p = lp.decode_lp(want)
        if frag is None:
            assert p.fragment is None
        else:
            assert bytes(p.fragment) == frag
        for k in kw:
            got = getattr(p, k)
            if k == "pit_token":
                got = bytes(got)
            if k == "nack_reason" and kw[k] == lp.NACK_NO_ELEMENT:
                assert got == lp.NACK_NONE and not p.nack_has_reason
                continue
            assert got == kw[k], (hx, k)


def test_nack_flags():
    p = lp.decode_lp(lp.encode(FRAG))
    assert p.nack_reason is None and not p.nack_has_reason
    p = lp.decode_lp(lp.encode(FRAG, nack_reason=lp.NACK_CONGESTION))
    assert p.nack_reason == 50 and p.nack_has_reason
    assert (lp.NACK_NONE, lp.NACK_CONGESTION, lp.NACK_DUPLICATE, lp.NACK_NO_ROUTE) == (0, 50, 100, 150)


def test_encode_nack_carries_interest():
    import vectors

    interest = vectors.ndn_notify()["msg Interest"]
    buf = bytearray(len(interest) + 20)
    n = lp.encode_nack(buf, 0, interest, lp.NACK_NO_ROUTE)
    p = lp.decode_lp(memoryview(buf)[:n])
    assert p.nack_reason == lp.NACK_NO_ROUTE and p.nack_has_reason
    assert bytes(p.fragment) == interest
    assert lp.is_lp(buf) and not lp.is_lp(interest) and not lp.is_lp(b"")


def test_decode_into_reuses_object():
    p = lp.LpPacket()
    lp.decode_lp(lp.encode(FRAG, sequence=7, acks=[1, 2, 3], nack_reason=100), p)
    acks = p.acks
    q = lp.decode_lp(lp.encode(FRAG), p)
    assert q is p and p.sequence is None and p.nack_reason is None and p.acks == []
    assert p.acks is acks


# Unknown header fields: ignored only in [800, 959] with the two low bits 0.
IGNORED = ["fd032400", "fd036000", "fd03bc00", "fd034c00", "fd033400", "fd03500101"]
REJECTED = ["fd032200", "fd032100", "fd032300", "fd03c000", "fd031c00", "6000", "6100", "fd04b000", "0500"]


def test_unknown_fields():
    for f in IGNORED:
        body = unhex(f) + unhex("5003aabbcc")
        pkt = bytes((0x64, len(body))) + body
        assert bytes(lp.decode_lp(pkt).fragment) == FRAG, f
    for f in REJECTED:
        body = unhex(f) + unhex("5003aabbcc")
        pkt = bytes((0x64, len(body))) + body
        assert raises(DecodeError, lp.decode_lp, pkt), f


MALFORMED = [
    "",
    "64",
    "6405 5003aabb",  # Fragment runs past the end
    "6405 5003aabbcc 00",  # trailing byte
    "640500 5003aabbcc",  # LpPacket length runs past the end
    "0503 070100",  # an Interest, not an LpPacket
    "650 0".replace(" ", ""),
    "640a 5103000001 5003aabbcc",  # Sequence not 8 octets
    "6416 51080000000000000001 51080000000000000001 5000",  # repeated Sequence
    "640a 5003aabbcc 5103000001",  # field after Fragment
    "6408 5003aabbcc 5001dd",  # two Fragments
    "6408 520103 520104 5000",  # repeated FragIndex
    "6405 5203000000",  # FragIndex of 3 octets
    "6404 6200 5000",  # empty PitToken
    "6408 fd032004fd032100 ",  # NackReason of 0 octets
    "640e fd03200a fd03210101 fd03210102",  # repeated NackReason
    "6409 fd032005fd03230100",  # unknown critical element in Nack
    "640d fd032000 fd032000 5003aabbcc",  # repeated Nack
    "6409 fd034405 0000000001",  # Ack not 8 octets
    "6409 fd033103 010203 5000",  # IncomingFaceId of 3 octets
    "64ff",
    "64fd",
]


def test_malformed():
    for hx in MALFORMED:
        data = unhex(hx.replace(" ", ""))
        assert raises(DecodeError, lp.decode_lp, data), hx


def test_encode_errors():
    assert raises(EncodeError, lambda: lp.encode(FRAG, pit_token=b""))
    assert raises(EncodeError, lambda: lp.encode(FRAG, pit_token=bytes(33)))
    assert raises(EncodeError, lambda: lp.encode(FRAG, sequence=1 << 64))
    assert raises(EncodeError, lp.encode_lp, bytearray(4), 0, FRAG)


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_lp")
