"""Sensor readings from journal payloads: what a board published (CBOR, or a number as
text), as one float. Plain Python with no Spark import: Spark ships this module to its
Python workers and calls `reading_of` as a UDF."""

from __future__ import annotations

import binascii
import math
from typing import Any

from pubmote_wire import cbor
from pubmote_wire.errors import DecodeError

# Looked up in this order in a CBOR map; else the map's only other number is the reading.
READING_KEYS = ("value", "reading", "celsius", "temperature")
# Numbers in a map that are never the reading (the demo's sequence and board clock).
NOT_READINGS = frozenset(("seq", "t_ms", "ts", "time", "t"))


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def reading_of(payload_hex: str | None, key: str | None = None) -> float | None:
    """The reading a payload carries, or None. `key` names the map entry to use; without
    it: a bare number, else the first of READING_KEYS present, else the map's single
    number that is not a sequence or clock. Never raises: a payload that isn't a reading
    is None (and counted by the pipeline as undecoded)."""
    if not payload_hex:
        return None
    try:
        raw = binascii.unhexlify(payload_hex)
    except (binascii.Error, ValueError):
        return None
    try:
        obj = cbor.loads(raw)
    except (DecodeError, ValueError):
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
