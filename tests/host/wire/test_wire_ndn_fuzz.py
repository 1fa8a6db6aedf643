"""Fuzzing the NDN parsers: for any input bytes only DecodeError may escape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubmote_wire import data, interest, name, notify, tlv
from pubmote_wire.errors import DecodeError
from pubmote_wire.signature import DigestSigner

SETTINGS = settings(max_examples=400, deadline=None)
PARSERS = [interest.decode_interest, data.decode_data, name.validate,
           notify.decode_notify_params, notify.parse_notify_interest]


def _only_decode_error(fn, buf) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(buf)
    except DecodeError:
        pass


def _varnum(n: int) -> bytes:
    out = bytearray(tlv.varnum_size(n))
    tlv.write_varnum(out, 0, n)
    return bytes(out)


tlv_types = st.sampled_from([0, 1, 2, 5, 6, 7, 8, 0x0A, 0x0C, 0x12, 0x14, 0x15, 0x16, 0x17,
                             0x18, 0x1A, 0x1B, 0x1C, 0x1E, 0x21, 0x22, 0x24, 0x2C, 0x2E,
                             0x80, 0xD3, 252, 253, 65535, 65536, 2**32 - 1, 2**64 - 1])
lengths = st.one_of(st.integers(0, 300), st.sampled_from([2**16, 2**32 - 1, 2**64 - 1]))


@st.composite
def tlv_soup(draw: st.DrawFn, depth: int = 0) -> bytes:
    out = b""
    for _ in range(draw(st.integers(0, 4))):
        typ = draw(tlv_types)
        if depth < 4 and draw(st.booleans()):
            value = draw(tlv_soup(depth + 1))
        else:
            value = draw(st.binary(max_size=40))
        n = len(value) if draw(st.booleans()) else draw(lengths)
        out += _varnum(typ) + _varnum(n) + value
    return out


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes(buf: bytes) -> None:
    for fn in PARSERS:
        _only_decode_error(fn, buf)


@SETTINGS
@given(tlv_soup())
def test_tlv_soup(buf: bytes) -> None:
    for fn in PARSERS:
        _only_decode_error(fn, buf)
    for typ in (5, 6, 7):
        _only_decode_error(interest.decode_interest, _varnum(typ) + _varnum(len(buf)) + buf)
        _only_decode_error(data.decode_data, _varnum(typ) + _varnum(len(buf)) + buf)


def _valid_packets() -> list[bytes]:
    n = name.from_uri("/a/seg=3/b")
    fh = [name.from_uri("/hint")]
    return [
        interest.encode(n, nonce=1, lifetime_ms=10, hop_limit=3, forwarding_hint=fh,
                        app_params=b"xy", signer=DigestSigner(), sig_time_ms=5),
        data.encode(n, b"c" * 20, content_type=0, freshness_ms=9,
                    final_block_id=name.segment(3)),
    ]


@SETTINGS
@given(st.sampled_from(_valid_packets()), st.integers(0, 200), st.integers(0, 255),
       st.integers(0, 200))
def test_mutations_and_truncations(w: bytes, pos: int, byte: int, cut: int) -> None:
    m = bytearray(w)
    m[pos % len(m)] = byte
    for buf in (bytes(m), w[: cut % len(w)], bytes(m)[: cut % len(w) + 1]):
        _only_decode_error(interest.decode_interest, buf)
        _only_decode_error(data.decode_data, buf)


@SETTINGS
@given(st.integers(3, 2**64 - 1), st.integers(1, 60))
def test_huge_claimed_lengths(n: int, depth: int) -> None:
    # A length claiming far more than the input, and deep nesting of Names.
    buf = b"\x05" + _varnum(n) + b"\x07\x00"
    with pytest.raises(DecodeError):
        interest.decode_interest(buf)
    nested = b""
    for _ in range(depth):
        nested = b"\x07" + _varnum(len(nested)) + nested
    _only_decode_error(data.decode_data, b"\x06" + _varnum(len(nested)) + nested)
    _only_decode_error(name.validate, nested)


@SETTINGS
@given(st.text(max_size=40))
def test_from_uri_text(s: str) -> None:
    try:
        n = name.from_uri(s)
    except DecodeError:
        return
    name.validate(n)
    assert name.from_uri(name.to_uri(n)) == n
