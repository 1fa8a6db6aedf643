"""Byte streams of link frames for the framing property tests (the codec's decoder and the
bridge's fast path): the kinds of piece a link delivers, and the reads it cuts them into."""

from __future__ import annotations

from hypothesis import strategies as st

from pubmote_wire import framing


def flip(frame: bytes, at: int, x: int) -> bytes:
    """frame with one byte between its delimiters XORed with x (x != 0: corrupted)."""
    b = bytearray(frame)
    i = 1 + at % max(1, len(b) - 2)
    b[i] ^= x
    return bytes(b)


PIECES = (
    st.binary(max_size=300).map(framing.encode),  # good frames, some over max_frame
    st.binary(max_size=300).map(lambda b: framing.encode(b)[:-1][: len(b) // 2 + 2]),  # cut
    st.binary(max_size=60),  # garbage, zeros included
    st.tuples(st.binary(min_size=1, max_size=100), st.integers(0, 400), st.integers(1, 255))
      .map(lambda t: flip(framing.encode(t[0]), t[1], t[2])),  # a corrupted byte
)


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    """stream in pieces, cut at each cut point (taken modulo its length + 1)."""
    points = sorted({c % (len(stream) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(stream)]:
        out.append(stream[prev:p])
        prev = p
    return out
