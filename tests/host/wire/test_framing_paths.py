"""The frame decoder's two paths agree: CPython decodes whole COBS blocks with bytes
operations, a board byte by byte; fed the same bytes in any chunking (good frames,
corrupted ones, oversize ones, garbage), both give the same payloads and the same counts."""

from __future__ import annotations

from frame_streams import PIECES, chunked
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pubmote_wire import framing


def _run(dec: framing.FrameDecoder, chunks: list[bytes]) -> tuple[list[bytes], dict[str, int]]:
    out: list[bytes] = []
    for c in chunks:
        out += dec.feed(c)
    return out, dec.stats()


PIECE = st.one_of(*PIECES)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECE, max_size=10), st.lists(st.integers(0, 10_000), max_size=8),
       st.sampled_from([16, 64, 200, 1024]))
def test_blockwise_and_bytewise_decoders_agree(pieces: list[bytes], cuts: list[int],
                                               max_frame: int) -> None:
    chunks = chunked(b"".join(pieces), cuts)
    fast = framing.FrameDecoder(max_frame)
    slow = framing.FrameDecoder(max_frame, bytewise=True)
    assert fast._blockwise and not slow._blockwise  # CPython: the two paths really differ
    assert _run(fast, chunks) == _run(slow, chunks)


def test_an_endless_frame_stays_bounded() -> None:
    fast = framing.FrameDecoder(64)
    for _ in range(1000):
        fast.feed(b"\x05abcd" * 100)  # never a delimiter
    assert len(fast._pend) <= fast._raw_cap
    assert fast.feed(b"\x00" + framing.encode(b"ok")) == [b"ok"]
    slow = framing.FrameDecoder(64, bytewise=True)
    for _ in range(1000):
        slow.feed(b"\x05abcd" * 100)
    slow.feed(b"\x00" + framing.encode(b"ok"))
    assert fast.stats() == slow.stats()


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.binary(max_size=1024),
                 st.lists(st.sampled_from([b"\x00", b"\x01", b"x" * 253, b"y" * 254,
                                           b"z" * 255]), max_size=8).map(b"".join)))
def test_blockwise_and_bytewise_encoders_agree(payload: bytes) -> None:
    a, b = bytearray(2100), bytearray(2100)
    n = framing.encode_frame(a, 3, payload)
    m = framing.encode_frame(b, 3, payload, bytewise=True)
    assert a[: 3 + n] == b[: 3 + m]
    assert framing.FrameDecoder(2048).feed(bytes(a[3 : 3 + n])) == [payload]


# payloads rich in zeros and in long non-zero runs: the COBS block edges
RUNS = st.lists(st.one_of(st.just(b"\x00"), st.binary(max_size=40),
                          st.integers(250, 260).map(lambda n: b"\x7f" * n)), max_size=8) \
    .map(b"".join)


@settings(max_examples=400, deadline=None)
@given(RUNS, st.integers(framing.FRAME_PART_MIN, 1100))
@example(b"\x7f" * 2049, 258)  # found in CI: over the 2,048 this test's decoder had
def test_frame_parts_join_to_encode_frame(payload: bytes, size: int) -> None:
    """What a board sends through its one-block buffer is exactly encode_frame's frame."""
    buf = bytearray(size)
    crc = framing.crc16(payload)
    out, pos = b"", 0
    while pos >= 0:
        n, pos = framing.encode_frame_part(buf, payload, crc, pos)
        out += bytes(buf[:n])
    assert out == framing.encode(payload)
    # RUNS reaches 2,080 bytes: a decoder takes a payload of exactly its max_frame, and
    # counts one byte more as oversize, on both paths
    for bytewise in (False, True):
        assert framing.FrameDecoder(len(payload), bytewise).feed(out) == [payload]
        if payload:
            small = framing.FrameDecoder(len(payload) - 1, bytewise)
            assert small.feed(out) == [] and small.frames_oversize == 1
