"""CBOR on the host: cbor2 (a C codec, well kept) behind the one error type host callers map
to their own messages. The board keeps pubmote_wire.cbor (small, no allocation surprises);
for the subset both speak they write the same bytes (shortest forms, map keys in canonical
order), which tests/host/wire/test_wire_cbor2.py cross-checks, so an envelope or a
registration reply is byte for byte what the board's codec would write.

Decoding is bounded by construction: before cbor2 builds a single object, `scan` walks the
item's heads (iteratively: no recursion, whatever the nesting) and refuses what is outside
the subset or over a limit: tags (all of them: shared references would build cycles,
bignums unbounded ints, the rest datetimes, sets, fractions...), undefined and simple
values, reserved heads, nesting deeper than MAX_DEPTH, more than MAX_ITEMS items, a length
that runs past the input, trailing bytes. What reaches cbor2 is then plain ints (64-bit),
floats, strings, arrays and maps of known size and depth (cbor2 checks text is UTF-8).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import Any

import cbor2

# Far above any pubmote payload (a mesh envelope is at most ~257 kB); refused before parsing
MAX_INPUT = 1 << 20
# Containers inside containers. A board's codec nests at most 16 (pubmote_wire.cbor);
# the margin is for SP and NDN applications, the bound for everyone's stack.
MAX_DEPTH = 64
# Items (array entries, map keys and values, scalars) in one CBOR item: bounds the objects
# (and so the memory, ~100 B each at worst) one decode builds, whatever the input's shape.
MAX_ITEMS = 1 << 16
# The types the scan lets through come out of cbor2 as these: the check afterwards is for
# cbor2's map keys (an array key becomes a tuple), which the subset has no use for.
_PLAIN = (int, float, bool, str, bytes, list, dict, type(None))
# indefinite-length entries on the scan's stack (definite ones are counts >= 0)
_INDEF_ARRAY = -1
_INDEF_BYTES = -2
_INDEF_TEXT = -3
_INDEF_MAP = -4  # at a key
_INDEF_MAP_VALUE = -5  # at a value: a break here leaves a key without one


class CborError(ValueError):
    """Bytes that are not one CBOR item of the supported subset, or a value CBOR cannot
    carry (the reason says which)."""


def dumps(obj: Any) -> bytes:
    """The canonical CBOR encoding of obj; CborError if a value cannot be encoded."""
    try:
        return cbor2.dumps(obj, canonical=True)
    except (cbor2.CBOREncodeError, TypeError, ValueError, RecursionError) as e:
        raise CborError("cannot encode as CBOR: %s" % e) from None


def loads(data: bytes | bytearray | memoryview, *, max_bytes: int = MAX_INPUT,
          max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS) -> Any:
    """Decode exactly one CBOR item filling data.

    Raises:
        CborError: too large, too deep, too many items, malformed, truncated, trailing
            bytes, or a type outside the subset (tags, undefined, simple values). Never
            any other exception, whatever the bytes.
    """
    n = len(data)
    if n > max_bytes:
        raise CborError("CBOR item of %d bytes exceeds %d" % (n, max_bytes))
    b = bytes(data)
    scan(b, max_depth=max_depth, max_items=max_items)
    try:
        # the scan has bounded depth and refused tags; cbor2's own guards are a second line
        obj = cbor2.CBORDecoder(io.BytesIO(b), max_depth=max_depth + 1, tag_hook=_refuse_tag,
                                semantic_decoders=_REFUSE_TAGS).decode()
    except (cbor2.CBORDecodeError, RecursionError, ValueError, TypeError, OverflowError) as e:
        raise CborError("not CBOR: %s" % e) from None
    _check_plain(obj)
    return obj


# What each initial byte starts, for the scan: (kind, bytes of argument that follow, the
# argument when it is in the initial byte itself)
_SCALAR, _STRING, _ARRAY, _MAP, _INDEF, _REFUSED, _BREAK = range(7)


def _head_table() -> tuple[tuple[int, int, int], ...]:
    out = []
    for ib in range(256):
        major, ai = ib >> 5, ib & 31
        width = 1 << (ai - 24) if 24 <= ai <= 27 else 0
        if ib == 0xFF:
            kind = _BREAK
        elif ai in (28, 29, 30) or major == 6:
            kind = _REFUSED  # reserved heads; tags
        elif major == 7:
            # false, true, null, half/single/double floats; not undefined or simple values
            kind = _SCALAR if 20 <= ai <= 22 or 25 <= ai <= 27 else _REFUSED
        elif ai == 31:
            kind = _INDEF if major >= 2 else _REFUSED
        else:
            kind = (_SCALAR, _SCALAR, _STRING, _STRING, _ARRAY, _MAP)[major]
        out.append((kind, width, ai if ai < 24 else 0))
    return tuple(out)


_HEADS = _head_table()


def _refuse_tag(*_args: Any) -> Any:
    raise CborError("CBOR tags are not supported")


class _EveryTag(Mapping[int, Any]):
    """cbor2's semantic_decoders for every tag number: refused, before a tag's value (a
    bignum, a cycle of shared references, a fraction to reduce) is built."""

    def __getitem__(self, tag: int) -> Any:
        return _refuse_tag

    def __contains__(self, tag: object) -> bool:
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(())

    def __len__(self) -> int:
        return 0


_REFUSE_TAGS = _EveryTag()


def scan(data: bytes, *, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS) -> None:
    """Check that data is exactly one well-formed CBOR item of the subset, within the
    limits, building nothing; CborError says what is wrong and at which byte. (Text is
    checked to be UTF-8 by cbor2 when it decodes.)"""
    n = len(data)
    pos = 0
    items = 0
    heads = _HEADS
    # items still to read in the innermost open container (a map counts keys and values),
    # or one of the _INDEF_* marks until its break; at the start, the one top-level item.
    # The enclosing containers' own counts wait on the stack.
    left = 1
    stack: list[int] = []
    while True:
        if left == 0:
            if not stack:
                break
            left = stack.pop()
            continue
        if pos >= n:
            raise CborError("truncated CBOR at byte %d" % pos)
        ib = data[pos]
        kind, width, arg = heads[ib]
        if kind == _BREAK:
            left = _close_indefinite(left, stack, pos)
            pos += 1
            continue
        if left > 0:
            left -= 1
        else:
            left = _next_in_indefinite(left, ib, kind, pos)
        items += 1
        if items > max_items:
            raise CborError("more than %d items in one CBOR item" % max_items)
        at = pos
        pos += 1 + width
        if pos > n:
            raise CborError("truncated CBOR at byte %d" % at)
        if kind == _SCALAR:
            continue
        if width:
            arg = int.from_bytes(data[at + 1:pos], "big")
        if kind == _STRING:
            if arg > n - pos:  # checked before anything is sliced
                raise CborError("string of %d bytes at byte %d runs past the input"
                                % (arg, at))
            pos += arg
            continue
        if kind == _REFUSED:
            raise _refused(ib, arg, at)
        stack.append(left)
        left = _open_container(ib, kind, arg, len(stack), max_depth, n - pos, at)
    if pos != n:
        raise CborError("trailing bytes after CBOR item at byte %d" % pos)


# The scan's steps off its common path (an item counted in a definite-length container):
# indefinite-length containers, refused heads, a container opening.


def _close_indefinite(left: int, stack: list[int], pos: int) -> int:
    """A break at pos: the enclosing container's count, once the innermost container is an
    indefinite-length one that may end here."""
    if left > 0 or left == _INDEF_MAP_VALUE or not stack:
        raise CborError("unexpected break at byte %d" % pos)
    return stack.pop()


def _next_in_indefinite(left: int, ib: int, kind: int, pos: int) -> int:
    """The mark after an item of an indefinite-length container: a map alternates key and
    value; a string takes only definite chunks of its own major type."""
    if left == _INDEF_MAP or left == _INDEF_MAP_VALUE:
        return _INDEF_MAP + _INDEF_MAP_VALUE - left
    if left != _INDEF_ARRAY and (ib >> 5 != -left or kind != _STRING):
        raise CborError("bad chunk in an indefinite-length string at byte %d" % pos)
    return left


def _refused(ib: int, arg: int, at: int) -> CborError:
    """Why the head ib at byte `at` is outside the subset."""
    if 28 <= ib & 31 <= 30:
        return CborError("reserved CBOR head 0x%02x at byte %d" % (ib, at))
    if ib >> 5 == 6:
        return CborError("CBOR tag %d at byte %d is not supported" % (arg, at))
    if ib >> 5 == 7:
        return CborError("CBOR simple value at byte %d is not supported" % at)
    return CborError("indefinite-length integer head 0x%02x at byte %d" % (ib, at))


def _open_container(ib: int, kind: int, arg: int, depth: int, max_depth: int, room: int,
                    at: int) -> int:
    """The count (or _INDEF_* mark) of a container opening at byte `at`, now `depth` deep,
    with `room` bytes of input after its head."""
    if depth > max_depth:
        raise CborError("CBOR nesting deeper than %d at byte %d" % (max_depth, at))
    if kind == _INDEF:
        major = ib >> 5
        return -major if major <= 3 else (_INDEF_ARRAY if major == 4 else _INDEF_MAP)
    left = arg if kind == _ARRAY else 2 * arg
    if left > room:  # every item takes at least one byte
        raise CborError("container of %d items at byte %d runs past the input" % (left, at))
    return left


def _check_plain(obj: Any) -> None:
    # recursion bounded by the scan's depth limit
    if not isinstance(obj, _PLAIN):
        raise CborError("unsupported CBOR value of type %s" % type(obj).__name__)
    if isinstance(obj, list):
        for x in obj:
            _check_plain(x)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_plain(k)
            _check_plain(v)
