# Tests of pubmote_wire.sp: SP-over-TCP header and messages (captured nng/nanocat bytes),
# stream reassembly at every split point, bounds (the NN_SUB filter: test_subfilter.py).
import vectors
from pubmote_wire import sp
from pubmote_wire.errors import DecodeError, EncodeError
from pubmote_wire.sp import NeedMore
from runner import raises, unhex

V = vectors.sp_tcp()


def test_protocol_numbers():
    assert (sp.PAIR, sp.PUB, sp.SUB, sp.REQ, sp.REP) == (0x10, 0x20, 0x21, 0x30, 0x31)
    assert sp.peer_of(sp.PUB) == sp.SUB and sp.peer_of(sp.SUB) == sp.PUB
    assert sp.peer_of(sp.REQ) == sp.REP and sp.peer_of(sp.PAIR) == sp.PAIR
    assert raises(ValueError, sp.peer_of, 0x99)


def test_headers_match_capture():
    assert sp.header(sp.PUB) == unhex(V["pub_header_hex"])
    assert sp.header(sp.SUB) == unhex(V["sub_header_hex"])
    assert sp.check_header(unhex(V["pub_header_hex"]), sp.PUB) == sp.PUB
    assert sp.check_header(unhex(V["sub_header_hex"])) == sp.SUB


BAD_HEADERS = [
    ("0053500000200000", sp.SUB),  # a PUB where a SUB was expected
    ("0153500000200000", None),  # magic
    ("0054500000200000", None),
    ("0053510000200000", None),
    ("0053500100200000", None),  # version
    ("0053500000200100", None),  # reserved
    ("0053500000200001", None),
    ("00535000002000", None),  # short
    ("005350000020000000", None),  # long
    ("", None),
]


def test_bad_headers():
    for hx, expect in BAD_HEADERS:
        assert raises(DecodeError, sp.check_header, unhex(hx), expect), hx


def test_message_matches_capture():
    want = unhex(V["frame_for_a/msg0_hex"])
    assert sp.encode_msg(b"a/msg0") == want
    buf = bytearray(20)
    assert sp.write_msg(buf, 2, b"a/msg0") == len(want)
    assert bytes(buf[2 : 2 + len(want)]) == want
    assert sp.msg_size(6) == len(want)
    assert raises(EncodeError, sp.write_msg, bytearray(10), 0, b"a/msg0")
    body, n = sp.decode_msg(want)
    assert bytes(body) == b"a/msg0" and n == len(want)


def test_decode_msg_need_more_and_limit():
    want = unhex(V["frame_for_a/msg0_hex"])
    for cut in range(len(want)):
        assert raises(NeedMore, sp.decode_msg, want[:cut])
    assert raises(DecodeError, sp.decode_msg, unhex("0000000000010001"), 0, 65536)
    assert raises(DecodeError, sp.decode_msg, unhex("ffffffffffffffff"))


def _stream():
    bodies = [b"a/msg0", b"", b"topic|" + bytes(range(256)), b"x" * 1000]
    data = sp.header(sp.PUB) + b"".join(sp.encode_msg(b) for b in bodies)
    return bodies, data


def test_decoder_every_split_point():
    bodies, data = _stream()
    for cut in range(len(data) + 1):
        d = sp.MsgDecoder(expect_header=sp.PUB)
        got = d.feed(data[:cut]) + d.feed(data[cut:])
        assert got == bodies, cut
        assert d.peer_proto == sp.PUB


def test_decoder_byte_at_a_time_and_three_way_splits():
    bodies, data = _stream()
    d = sp.MsgDecoder(expect_header=sp.PUB)
    got = []
    for i in range(len(data)):
        got += d.feed(data[i : i + 1])
    assert got == bodies
    small = sp.header(sp.PUB) + sp.encode_msg(b"ab") + sp.encode_msg(b"cde")
    for a in range(len(small) + 1):
        for b in range(a, len(small) + 1):
            d = sp.MsgDecoder(expect_header=sp.PUB)
            got = d.feed(small[:a]) + d.feed(memoryview(small)[a:b]) + d.feed(bytearray(small[b:]))
            assert got == [b"ab", b"cde"]


def test_decoder_without_header():
    d = sp.MsgDecoder()
    assert d.feed(sp.encode_msg(b"hi")) == [b"hi"]
    assert d.peer_proto is None


def test_decoder_rejects_bad_header_and_stays_failed():
    d = sp.MsgDecoder(expect_header=sp.PUB)
    assert d.feed(b"\x00\x53\x50") == []
    assert raises(DecodeError, d.feed, b"\x00\x00\x21\x00\x00")  # a SUB peer
    assert raises(DecodeError, d.feed, sp.encode_msg(b"x"))


def test_decoder_length_limit_is_immediate():
    d = sp.MsgDecoder(max_msg=100)
    assert d.feed(sp.encode_msg(b"y" * 100)) == [b"y" * 100]
    # Only the 8 length bytes are given: the lie is caught before any body arrives.
    assert raises(DecodeError, d.feed, unhex("0000000000000065"))
    d = sp.MsgDecoder()
    assert raises(DecodeError, d.feed, unhex("ffffffffffffffff"))
    assert d.failed


def test_decoder_body_grows_only_with_input():
    d = sp.MsgDecoder(max_msg=65536)
    d.feed(unhex("0000000000010000") + b"abc")
    assert len(d._body) == 3


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_sp")
