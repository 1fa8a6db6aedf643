"""Random bytes and chunkings into every incremental parser: only DecodeError escapes
(the framer raises nothing), nothing hangs, and buffers stay within their bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pubmote_wire import cbor, framing, lp, lp_frag, sp
from pubmote_wire.errors import DecodeError

SETTINGS = settings(max_examples=300, deadline=2000)
CHUNKS = st.lists(st.binary(max_size=200), max_size=12)


def _mixed(frames: list[bytes], noise: list[bytes]) -> list[bytes]:
    out = []
    for i, f in enumerate(frames):
        out.append(framing.encode(f))
        if i < len(noise):
            out.append(noise[i])
    return out


@SETTINGS
@given(CHUNKS)
def test_frame_decoder_random_chunks(chunks: list[bytes]) -> None:
    d = framing.FrameDecoder(max_frame=64)
    size = len(d.buf)
    for c in chunks:
        for p in d.feed(c):
            assert len(p) <= 64
    assert len(d.buf) == size


@SETTINGS
@given(st.lists(st.binary(max_size=80), max_size=6), st.lists(st.binary(max_size=30), max_size=6),
       st.data())
def test_frame_decoder_recovers_good_frames(frames: list[bytes], noise: list[bytes], data) -> None:
    # Garbage between frames may eat nothing but itself: every frame comes through.
    stream = b"".join(_mixed(frames, noise))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    d = framing.FrameDecoder(max_frame=80)
    got: list[bytes] = []
    prev = 0
    for c in [*cuts, len(stream)]:
        got += d.feed(stream[prev:c])
        prev = c
    # A noise chunk can collide with a valid frame only with CRC luck; require the real ones.
    it = iter(got)
    assert all(any(g == f for g in it) for f in frames)


@SETTINGS
@given(CHUNKS, st.sampled_from([None, sp.PUB, sp.SUB]))
def test_msg_decoder_random_chunks(chunks: list[bytes], expect: int | None) -> None:
    d = sp.MsgDecoder(max_msg=256, expect_header=expect)
    for c in chunks:
        try:
            for m in d.feed(c):
                assert len(m) <= 256
        except DecodeError:
            assert d.failed
            break
        assert d._body is None or len(d._body) <= 256


@SETTINGS
@given(st.lists(st.binary(max_size=300), max_size=5), st.data())
def test_msg_decoder_chunking_invariant(bodies: list[bytes], data) -> None:
    stream = sp.header(sp.PUB) + b"".join(sp.encode_msg(b) for b in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    d = sp.MsgDecoder(max_msg=300, expect_header=sp.PUB)
    got: list[bytes] = []
    prev = 0
    for c in [*cuts, len(stream)]:
        got += d.feed(stream[prev:c])
        prev = c
    assert got == bodies


@SETTINGS
@given(st.binary(max_size=300))
def test_decode_lp_random(data: bytes) -> None:
    try:
        lp.decode_lp(data)
    except DecodeError:
        pass
    try:
        lp.decode_lp(b"\x64" + bytes([len(data)]) + data if len(data) < 253 else data)
    except DecodeError:
        pass


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(0, 6),
                          st.binary(max_size=40)), max_size=40),
       st.lists(st.binary(max_size=60), max_size=5))
def test_reassembler_random_fragments(frags, raw) -> None:
    r = lp_frag.Reassembler(max_partial=3, max_bytes=200, timeout_ms=50, max_fragments=8)
    now = 0
    for seq, idx, cnt, body in frags:
        now += 7
        wire = lp.encode(body, sequence=seq, frag_index=idx, frag_count=cnt)
        try:
            out = r.feed(wire, now)
        except DecodeError:
            continue
        if out is not None:
            assert len(out) <= 200 or cnt <= 1
        st_ = r.stats()
        assert st_["partials"] <= 3 and st_["bytes"] <= 200
    for w in raw:
        try:
            r.feed(w, now)
        except DecodeError:
            pass


@SETTINGS
@given(st.binary(min_size=1, max_size=2000), st.integers(40, 400), st.randoms(use_true_random=False))
def test_fragment_roundtrip_any_order(packet: bytes, mtu: int, rnd) -> None:
    frags = lp_frag.fragment(packet, mtu, 12345)
    assert all(len(f) <= mtu for f in frags)
    rnd.shuffle(frags)
    r = lp_frag.Reassembler(max_fragments=64, max_bytes=4096)
    outs = [o for o in (r.feed(f, 0) for f in frags) if o is not None]
    if len(frags) <= 64:
        assert [bytes(o) for o in outs] == [packet]


@SETTINGS
@given(st.binary(max_size=200))
def test_cbor_loads_random(data: bytes) -> None:
    try:
        cbor.loads(data)
    except DecodeError:
        pass


@SETTINGS
@given(st.binary(max_size=40), st.sampled_from([0x9B, 0xBB, 0x5B, 0x7B, 0x9A, 0xBA]))
def test_cbor_huge_claims_fail_fast(tail: bytes, head: int) -> None:
    data = bytes([head]) + b"\xff" * (8 if head & 0x1F == 27 else 4) + tail
    try:
        cbor.loads(data)
    except DecodeError:
        pass
