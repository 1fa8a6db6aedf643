"""Strict bencode: canonical round trips, and every malformed or non-canonical input is a
BencodeError (never another exception), with bounded depth and size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubmote.dht import bencode
from pubmote.dht.bencode import BencodeError

CASES: list[tuple[object, bytes]] = [
    (0, b"i0e"),
    (-42, b"i-42e"),
    (2**63, b"i9223372036854775808e"),
    (b"", b"0:"),
    (b"spam", b"4:spam"),
    ("h\u00e9", b"3:h\xc3\xa9"),
    ([], b"le"),
    ([1, b"a", [b"b"]], b"li1e1:al1:bee"),
    ({}, b"de"),
    ({b"b": 1, b"a": 2}, b"d1:ai2e1:bi1ee"),  # keys sorted as raw bytes
    ({"cow": b"moo", "spam": [b"a", b"b"]}, b"d3:cow3:moo4:spaml1:a1:bee"),
]


@pytest.mark.parametrize(("value", "wire"), CASES)
def test_encode_and_decode_exact_bytes(value: object, wire: bytes) -> None:
    assert bencode.encode(value) == wire
    assert bencode.decode(wire) == _as_decoded(value)


def _as_decoded(value: object) -> object:
    """What decoding gives back: bencode strings are bytes, whatever was encoded."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return [_as_decoded(v) for v in value]
    if isinstance(value, dict):
        return {_as_decoded(k): _as_decoded(v) for k, v in value.items()}
    return value


MALFORMED = [
    b"", b"i", b"ie", b"i-e", b"i-0e", b"i01e", b"i1", b"i1x", b"i--1e", b"i 1e",
    b"i123456789012345678901e",  # more digits than any DHT integer needs
    b"1", b"1:", b"2:a", b"01:a", b"-1:a", b"99999999999999:a", b"a",
    b"l", b"li1e", b"d", b"d1:a", b"d1:ai1e", b"di1ei1ee", b"d1:bi1e1:ai2ee",  # unsorted
    b"d1:ai1e1:ai2ee",  # duplicate key
    b"i1ei2e", b"4:spamx", b"le1", b"\xff", b"d1:a\xffe",
    b"l" * 40 + b"e" * 40,  # deeper than MAX_DEPTH
]


@pytest.mark.parametrize("wire", MALFORMED)
def test_malformed_is_bencode_error(wire: bytes) -> None:
    with pytest.raises(BencodeError):
        bencode.decode(wire)


def test_bounds() -> None:
    with pytest.raises(BencodeError):
        bencode.decode(b"l" + b"i1e" * (bencode.MAX_ITEMS + 1) + b"e")
    with pytest.raises(BencodeError):
        bencode.decode(b"0:" * 2, max_len=1)
    deep: object = b"x"
    for _ in range(bencode.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(BencodeError):
        bencode.encode(deep)


@pytest.mark.parametrize("bad", [True, 1.5, None, {1: 2}, object()])
def test_unencodable_values(bad: object) -> None:
    with pytest.raises(BencodeError):
        bencode.encode(bad)


def test_error_is_a_value_error() -> None:
    assert issubclass(BencodeError, ValueError)


values = st.recursive(
    st.integers(min_value=-(2**64), max_value=2**64) | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.binary(max_size=8), children, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip_any_value(v: object) -> None:
    wire = bencode.encode(v)
    assert bencode.encode(bencode.decode(wire)) == wire


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_bencode_error(data: bytes) -> None:
    try:
        v = bencode.decode(data)
    except BencodeError:
        return
    assert bencode.encode(v) == data  # strictness: what decodes is canonical


@settings(max_examples=500, deadline=None)
@given(values, st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=3))
def test_mutated_bytes_never_crash(v: object, pos: int, junk: bytes) -> None:
    wire = bytearray(bencode.encode(v))
    p = pos % (len(wire) + 1)
    wire[p:p + len(junk)] = junk
    try:
        out = bencode.decode(bytes(wire))
    except BencodeError:
        return
    assert bencode.encode(out) == bytes(wire)
