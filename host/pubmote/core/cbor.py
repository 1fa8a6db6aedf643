"""CBOR on the host: cbor2 (a C codec, well kept) behind the one error type host callers map
to their own messages. The board keeps pubmote_wire.cbor (small, no allocation surprises);
for the subset both speak they write the same bytes (shortest forms, map keys in canonical
order), which tests/host/wire/test_wire_cbor2.py cross-checks, so an envelope or a
registration reply is byte for byte what the board's codec would write.
"""

from __future__ import annotations

import io
from typing import Any

import cbor2

# Far above any pubmote payload (a mesh envelope is at most ~257 kB); refused before parsing
MAX_INPUT = 1 << 20
# The types pubmote_wire.cbor decodes to: cbor2 turns tags into datetimes, decimals and
# more, which no pubmote peer sends and no caller expects.
_PLAIN = (int, float, bool, str, bytes, list, dict, type(None))


class CborError(ValueError):
    """Bytes that are not one CBOR item of the supported subset, or a value CBOR cannot
    carry (the reason says which)."""


def dumps(obj: Any) -> bytes:
    """The canonical CBOR encoding of obj; CborError if a value cannot be encoded."""
    try:
        return cbor2.dumps(obj, canonical=True)
    except (cbor2.CBOREncodeError, TypeError, ValueError) as e:
        raise CborError("cannot encode as CBOR: %s" % e) from None


def loads(data: bytes | bytearray | memoryview, *, max_bytes: int = MAX_INPUT) -> Any:
    """Decode exactly one CBOR item filling data.

    Raises:
        CborError: too large, malformed, truncated, trailing bytes, or a type outside the
            subset (tags, undefined, simple values).
    """
    n = len(data)
    if n > max_bytes:
        raise CborError("CBOR item of %d bytes exceeds %d" % (n, max_bytes))
    fp = io.BytesIO(data)
    try:
        # cbor2 reads declared lengths in bounded chunks and caps nesting, so a lying
        # length ends in "premature end of stream", never a huge allocation
        obj = cbor2.CBORDecoder(fp).decode()
    except (cbor2.CBORDecodeError, RecursionError, ValueError, TypeError) as e:
        raise CborError("not CBOR: %s" % e) from None
    if fp.tell() != n:
        raise CborError("trailing bytes after CBOR item")
    _check_plain(obj)
    return obj


def _check_plain(obj: Any) -> None:
    if not isinstance(obj, _PLAIN):
        raise CborError("unsupported CBOR value of type %s" % type(obj).__name__)
    if isinstance(obj, list):
        for x in obj:
            _check_plain(x)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_plain(k)
            _check_plain(v)
