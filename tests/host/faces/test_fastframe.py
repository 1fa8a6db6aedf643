"""The bridge's fast framing (pubmote.faces.fastframe) gives the codec's bytes: `encode` is
framing.encode, and the Deframer, fed the same bytes in any chunking (good frames, cut,
corrupted and oversize ones, garbage), gives the FrameDecoder's payloads and counts."""

from __future__ import annotations

from frame_streams import PIECES, chunked
from hypothesis import given, settings
from hypothesis import strategies as st

from pubmote.faces import fastframe
from pubmote_wire import framing

PIECE = st.one_of(
    *PIECES,
    st.just(b"\x00\x00\x00"),  # empty frames
    st.just(framing.encode(b"")),  # a frame of an empty payload (CRC only)
)


def _counts(d: framing.FrameDecoder | fastframe.Deframer) -> tuple[int, int, int, int]:
    return (d.frames_ok, d.frames_bad_crc, d.frames_bad_cobs, d.frames_oversize)


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECE, max_size=10), st.lists(st.integers(0, 10_000), max_size=8),
       st.sampled_from([16, 64, 200, 1024]))
def test_deframer_is_the_codec(pieces: list[bytes], cuts: list[int], max_frame: int) -> None:
    codec = framing.FrameDecoder(max_frame)
    fast = fastframe.Deframer(max_frame)
    want: list[bytes] = []
    got: list[bytes] = []
    for c in chunked(b"".join(pieces), cuts):
        want += codec.feed(c)
        got += fast.feed(c)
    assert got == want
    assert _counts(fast) == _counts(codec)


def test_deframer_takes_whole_frames_itself() -> None:
    fast = fastframe.Deframer(1024)
    frames = [framing.encode(b"\x05\x00\x01" * k) for k in range(1, 40)]
    assert fast.feed(b"".join(frames)) == [b"\x05\x00\x01" * k for k in range(1, 40)]
    assert fast.fast_ok == 39 and fast.codec.frames_ok == 0


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=1200),
                 st.tuples(st.integers(0, 600), st.integers(0, 3)).map(
                     lambda t: b"\x01" * t[0] + b"\x00" * t[1] + b"\x02" * (254 - t[1]))))
def test_encode_is_the_codec(payload: bytes) -> None:
    assert fastframe.encode(payload) == framing.encode(payload)


def test_encode_at_block_edges() -> None:
    for n in (252, 253, 254, 255, 508, 509, 510):
        for tail in (b"", b"\x00", b"\x00\x07"):
            p = b"\x01" * n + tail
            assert fastframe.encode(p) == framing.encode(p)
            assert fastframe.encode(memoryview(p)) == framing.encode(p)
