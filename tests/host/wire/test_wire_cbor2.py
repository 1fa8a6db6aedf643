"""Cross-check pubmote_wire.cbor (the board's) against cbor2 and the host's codec
(pubmote.core.cbor, cbor2 underneath), both ways, over the supported subset."""

from __future__ import annotations

import math
from typing import Any

import cbor2
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pubmote.core import cbor as host_cbor
from pubmote_wire import cbor
from pubmote_wire.errors import DecodeError

INTS = st.integers(min_value=-(2**64), max_value=2**64 - 1)
SCALARS = (
    INTS
    | st.booleans()
    | st.none()
    | st.binary(max_size=300)
    | st.text(max_size=60)
    | st.floats(allow_nan=False)
)
KEYS = st.integers(min_value=-(2**64), max_value=2**64 - 1) | st.text(max_size=10) | st.binary(max_size=10)


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda kids: st.lists(kids, max_size=6) | st.dictionaries(KEYS, kids, max_size=5),
        max_leaves=25,
    )


VALUES = _values()


def _sorted_like_ours(obj: Any) -> Any:
    """The same value with every map rebuilt in our key order (bytewise by encoded key),
    so cbor2's insertion-order output can be compared byte for byte."""
    if isinstance(obj, list):
        return [_sorted_like_ours(x) for x in obj]
    if isinstance(obj, dict):
        keys = sorted(obj, key=cbor.dumps)
        return {k: _sorted_like_ours(obj[k]) for k in keys}
    return obj


def _has_float(obj: Any) -> bool:
    if isinstance(obj, float):
        return True
    if isinstance(obj, list):
        return any(_has_float(x) for x in obj)
    if isinstance(obj, dict):
        return any(_has_float(x) for x in obj.values())
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) or (set(a) == set(b) and all(_same(a[k], b[k]) for k in a))
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_ours_decodes_with_cbor2(value: Any) -> None:
    data = cbor.dumps(value)
    assert _same(cbor2.loads(data), value)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_cbor2_decodes_with_ours(value: Any) -> None:
    assert _same(cbor.loads(cbor2.dumps(value)), value)
    # cbor2's canonical mode writes shortest floats: our half/single decoding must agree.
    assert _same(cbor.loads(cbor2.dumps(value, canonical=True)), value)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_same_bytes_as_cbor2(value: Any) -> None:
    # cbor2's default: shortest ints, insertion-ordered maps; its floats are doubles, ours
    # the preferred width (test_float_bytes_as_cbor2_canonical)
    assume(not _has_float(value))
    value = _sorted_like_ours(value)
    assert cbor.dumps(value) == cbor2.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(width=16) | st.floats(width=32) | st.floats())
def test_float_widths(x: float) -> None:
    for data in (cbor2.dumps(x, canonical=True), cbor2.dumps(x)):
        got = cbor.loads(data)
        assert got == x or (math.isnan(got) and math.isnan(x))


@settings(max_examples=500, deadline=None)
@given(st.floats(width=16, allow_nan=False) | st.floats(width=32, allow_nan=False)
       | st.floats(allow_nan=False))
def test_float_bytes_as_cbor2_canonical(x: float) -> None:
    # RFC 8949 preferred serialisation, which cbor2 writes for a float in canonical mode
    assert cbor.dumps([x]) == cbor2.dumps([x], canonical=True)
    assert cbor.dumps(x) == cbor2.dumps(x, canonical=True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_agrees_on_acceptance(data: bytes) -> None:
    # Whatever we accept, cbor2 accepts with the same value (we may reject more: tags,
    # undefined, simple values, duplicate keys, indefinite lengths).
    try:
        ours = cbor.loads(data)
    except DecodeError:
        return
    assert _same(cbor2.loads(data), ours)


# ---- the host's codec (pubmote.core.cbor, cbor2 underneath) against the board's ----------

TEXT_KEYED = st.recursive(
    SCALARS,
    lambda kids: st.lists(kids, max_size=6) | st.dictionaries(st.text(max_size=10), kids,
                                                              max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(TEXT_KEYED)
def test_host_writes_the_boards_bytes_for_text_keyed_maps(value: Any) -> None:
    # Every map the host writes (envelopes, directed payloads, registration replies) has
    # text keys: there cbor2's canonical order (length first) and ours (bytewise) agree.
    assert host_cbor.dumps(value) == cbor.dumps(value)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_each_side_reads_the_others_bytes(value: Any) -> None:
    assert _same(host_cbor.loads(cbor.dumps(value)), value)
    assert _same(cbor.loads(host_cbor.dumps(value)), value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_host_accepts_what_the_board_accepts(data: bytes) -> None:
    try:
        ours = cbor.loads(data)
    except DecodeError:
        return
    assert _same(host_cbor.loads(data), ours)


def test_host_refusals_are_one_error_type() -> None:
    lying = (b"\x5b\x00\x00\x00\xff\xff\xff\xff\xff",  # 1 TB byte string in 9 bytes
             b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff",  # 2**64-1 items
             b"\x81" * 5000 + b"\x01")                 # nesting beyond cbor2's cap
    other = (b"", b"\x01\x02", b"\xc1\x1a\x00\x00\x00\x01", b"\xf7", b"\x62\xff\xfe")
    for data in lying + other:
        with pytest.raises(host_cbor.CborError):
            host_cbor.loads(data)
    with pytest.raises(host_cbor.CborError):
        host_cbor.loads(b"\x01" * 100, max_bytes=99)
    with pytest.raises(host_cbor.CborError):
        host_cbor.dumps({"x": object()})
