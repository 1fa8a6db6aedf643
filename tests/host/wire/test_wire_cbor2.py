"""Cross-check pubmote_wire.cbor against cbor2, both ways, over the supported subset."""

from __future__ import annotations

import math
from typing import Any

import cbor2
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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
