# Tests of pubmote_wire.lp_frag: indexed fragmentation and the bounded Reassembler.
from pubmote_wire import lp, lp_frag
from pubmote_wire.errors import DecodeError, EncodeError
from runner import raises, unhex

FRAG = unhex("aabbcc")


def _packet(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def test_fragment_exact_bytes():
    # 24 bytes would fit unfragmented; at 23 the worst-case overhead (20) leaves 3 per piece.
    assert len(lp_frag.fragment(bytes(range(1, 11)), 24, 0x10)) == 1
    frags = lp_frag.fragment(bytes(range(1, 11)), 23, 0x10)
    assert frags == [
        unhex("6415 51080000000000000010 520100 530104 5003 010203"),
        unhex("6415 51080000000000000011 520101 530104 5003 040506"),
        unhex("6415 51080000000000000012 520102 530104 5003 070809"),
        unhex("6413 51080000000000000013 520103 530104 5001 0a"),
    ]
    one = lp_frag.fragment(b"\x05\x00", 64, 9)
    assert one == [unhex("640e 51080000000000000009 50020500")]


def test_fragment_sizes_and_reassembly():
    for size, mtu in ((1, 30), (100, 30), (700, 100), (600, 64), (900, 400), (300, 300), (253, 270)):
        pkt = _packet(size)
        frags = lp_frag.fragment(pkt, mtu, 1000)
        r = lp_frag.Reassembler()
        out = None
        for f in frags:
            assert len(f) <= mtu, (size, mtu)
            assert out is None
            out = r.feed(f, 0)
        assert bytes(out) == pkt, (size, mtu)
        assert r.stats()["partials"] == 0 and r.stats()["bytes"] == 0


def test_fragment_into_buffer():
    pkt = _packet(500)
    count, _chunk = lp_frag.fragment_plan(len(pkt), 80)
    buf = bytearray(80)
    r = lp_frag.Reassembler()
    out = None
    for i in reversed(range(count)):
        n = lp_frag.encode_fragment(buf, 0, pkt, 80, 5, i)
        assert n <= 80
        out = r.feed(bytes(buf[:n]), 1)
    assert out == pkt
    assert raises(EncodeError, lp_frag.encode_fragment, buf, 0, pkt, 80, 5, count)


def test_fragment_mtu_too_small():
    assert raises(EncodeError, lp_frag.fragment, _packet(100), 20, 0)
    assert raises(EncodeError, lp_frag.fragment, b"", 100, 0)


def test_reassembler_passthrough_and_idle():
    r = lp_frag.Reassembler()
    wire = lp.encode(FRAG, sequence=3)
    assert bytes(r.feed(wire, 0)) == FRAG
    assert r.feed(lp.encode(None, acks=[1]), 0) is None
    assert bytes(r.feed(lp.decode_lp(lp.encode(FRAG, frag_index=0, frag_count=1)), 0)) == FRAG


def test_reassembler_out_of_order_duplicates_interleaved():
    a = lp_frag.fragment(_packet(300), 64, 100)
    b = lp_frag.fragment(_packet(200), 64, 5000)
    r = lp_frag.Reassembler()
    assert r.feed(a[2], 0) is None
    assert r.feed(b[1], 0) is None
    assert r.feed(a[2], 0) is None
    assert r.duplicates == 1
    done = []
    for f in a[:2] + a[3:] + b[:1] + b[2:]:
        out = r.feed(f, 0)
        if out is not None:
            done.append(out)
    assert done == [_packet(300), _packet(200)]
    assert r.completed == 2


def test_reassembler_eviction_and_timeout():
    r = lp_frag.Reassembler(max_partial=2, timeout_ms=1000)
    firsts = [lp_frag.fragment(_packet(200), 64, base)[0] for base in (0, 100, 200)]
    for f in firsts:
        assert r.feed(f, 0) is None
    assert r.evictions == 1 and r.stats()["partials"] == 2
    assert r.feed(lp_frag.fragment(_packet(200), 64, 300)[0], 1500) is None
    assert r.timeouts == 2 and r.stats()["partials"] == 1


def test_reassembler_byte_bound():
    r = lp_frag.Reassembler(max_bytes=300)
    frags = lp_frag.fragment(_packet(1000), 200, 0)
    for f in frags:
        assert r.feed(f, 0) is None
    assert r.stats()["bytes"] <= 300
    assert r.dropped + r.evictions > 0
    r2 = lp_frag.Reassembler(max_bytes=800)
    for f in lp_frag.fragment(_packet(600), 200, 0)[:2]:
        r2.feed(f, 0)
    for f in lp_frag.fragment(_packet(600), 200, 50)[:3]:
        r2.feed(f, 0)
    assert r2.stats()["bytes"] <= 800 and r2.evictions == 1


def test_reassembler_fragment_count_bound():
    r = lp_frag.Reassembler(max_fragments=4)
    frags = lp_frag.fragment(_packet(100), 30, 0)
    assert len(frags) > 4
    assert r.feed(frags[0], 0) is None
    assert r.dropped == 1 and r.stats()["partials"] == 0


REASSEMBLY_MALFORMED = [
    lp.encode(FRAG, sequence=1, frag_index=2, frag_count=2),  # index >= count
    lp.encode(FRAG, sequence=1, frag_index=0, frag_count=0),  # count 0
    lp.encode(FRAG, frag_index=0, frag_count=2),  # no Sequence
    lp.encode(b"", sequence=1, frag_index=0, frag_count=2),  # empty piece
    unhex("6405 5003aabb"),  # not even an LpPacket
]


def test_reassembler_malformed_counted():
    r = lp_frag.Reassembler()
    for wire in REASSEMBLY_MALFORMED:
        assert raises(DecodeError, r.feed, wire, 0)
    assert r.malformed == len(REASSEMBLY_MALFORMED)


def test_reassembler_inconsistent_count():
    r = lp_frag.Reassembler()
    assert r.feed(lp.encode(FRAG, sequence=10, frag_index=0, frag_count=3), 0) is None
    assert raises(DecodeError, r.feed, lp.encode(FRAG, sequence=11, frag_index=1, frag_count=2), 0)
    assert r.malformed == 1 and r.stats()["partials"] == 0


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_lp_frag")
