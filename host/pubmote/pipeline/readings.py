"""Sensor readings from journal payloads: what a board published (CBOR, or a number as
text), as one float. Plain Python with no Spark import: the pipeline's compaction
(columns.py) calls `readings_of` on a journal file's payloads once, when it writes the
file's typed columns.

CBOR is decoded by cbor2's C decoder (2.5x faster per payload than the pure-Python
pubmote_wire subset the boards speak, bench/pipeline/PROFILE.md), held to the same
rules where it matters for a reading: one item filling the whole payload (so b"21.5"
stays the text number it is, not CBOR -19 followed by junk), no tags, bounded nesting.
Payloads are whatever a peer sent: every tag is refused before its value is built (a
bignum, a cycle of shared references or a huge fraction to reduce), the nesting is capped
by cbor2 before it recurses, and no value can make reading_of raise."""

from __future__ import annotations

import binascii
import io
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import cbor2

# Looked up in this order in a CBOR map; else the map's only other number is the reading.
READING_KEYS = ("value", "reading", "celsius", "temperature")
# Numbers in a map that are never the reading (the demo's sequence and board clock).
NOT_READINGS = frozenset(("seq", "t_ms", "taken_ms", "ts", "time", "t"))


# A board's payload is under 1 kB, an SP message under 64 kB; beyond, not a reading
MAX_PAYLOAD = 1 << 20
MAX_DEPTH = 64  # containers in containers (a board's codec nests at most 16)


class _NotCbor(Exception):
    pass


def _refuse_tag(*_args: Any) -> Any:
    raise _NotCbor()


class _EveryTag(Mapping[int, Any]):
    """cbor2's semantic_decoders for every tag number: refused before the tag's value is
    built (unknown tags go to tag_hook, refused the same way)."""

    def __getitem__(self, tag: int) -> Any:
        return _refuse_tag

    def __contains__(self, tag: object) -> bool:
        return True

    def __iter__(self) -> Iterator[int]:
        return iter(())

    def __len__(self) -> int:
        return 0


_NO_TAGS = _EveryTag()


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _cbor_item(raw: bytes) -> Any:
    """The one CBOR item that is all of `raw`, or _NotCbor."""
    f = io.BytesIO(raw)
    try:
        obj = cbor2.CBORDecoder(f, max_depth=MAX_DEPTH, tag_hook=_refuse_tag,
                                semantic_decoders=_NO_TAGS).decode()
    except Exception as e:  # cbor2 raises several types on bad input; all mean "not CBOR"
        raise _NotCbor() from e
    if f.tell() != len(raw):
        raise _NotCbor()
    return obj


def reading_of(payload_hex: str | None, key: str | None = None) -> float | None:
    """The reading a payload carries, or None. `key` names the map entry to use; without
    it: a bare number, else the first of READING_KEYS present, else the map's single
    number that is not a sequence or clock. Never raises: a payload that isn't a reading
    is None (and counted by the pipeline as undecoded)."""
    if not payload_hex or len(payload_hex) > 2 * MAX_PAYLOAD:
        return None
    try:
        raw = binascii.unhexlify(payload_hex)
    except (binascii.Error, ValueError):
        return None
    try:
        obj = _cbor_item(raw)
    except _NotCbor:
        try:  # SP publishers often send the number as text: b"21.5"
            return _number(float(raw.decode("ascii")))
        except (UnicodeDecodeError, ValueError):
            return None
    if not isinstance(obj, dict):
        return _number(obj)
    if key is not None:
        return _number(obj.get(key))
    for k in READING_KEYS:
        if k in obj:
            return _number(obj[k])
    found = [v for k, v in obj.items() if k not in NOT_READINGS and _number(v) is not None]
    return _number(found[0]) if len(found) == 1 else None


def readings_of(payloads: Iterable[str | None], key: str | None = None) -> list[float | None]:
    """reading_of over a batch (what the compaction calls once per journal file)."""
    return [reading_of(p, key) for p in payloads]
