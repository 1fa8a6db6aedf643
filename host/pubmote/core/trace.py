"""Packet tracing: `pubmote bridge --trace FILE` writes one JSON line per packet (time,
face, direction, bytes as hex); `pubmote dissect --trace FILE` shows them dissected."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import IO, Any


class Tracer:
    """Appends packet records to a file, line by line, so a crash loses at most one."""

    def __init__(self, path: str) -> None:
        self._f: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()
        self.records = 0

    def record(self, face: str, direction: str, pkt: bytes) -> None:
        self._f.write(json.dumps({"t": round(time.time(), 6), "face": face, "dir": direction,
                                  "hex": pkt.hex()}) + "\n")
        self.records += 1

    def close(self) -> None:
        self._f.close()


class TraceError(ValueError):
    """A file that is not a `pubmote bridge --trace` file; the message says where."""


def _record(line: str) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if (not isinstance(rec, dict) or not isinstance(rec.get("hex"), str)
            or not isinstance(rec.get("t"), int | float) or rec.get("dir") not in ("in", "out")
            or not isinstance(rec.get("face"), str)):
        return None
    try:
        bytes.fromhex(rec["hex"])
    except ValueError:
        return None
    return rec


def read_trace(path: str) -> Iterator[dict[str, Any]]:
    """The records of a trace file. A torn last line (a crash while writing) is skipped;
    anything else that is not a record raises TraceError naming its line, and a file
    without a single record (empty, text, a JSON document, binary) is no trace at all."""
    seen = 0
    torn: int | None = None
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if torn is not None:
                raise TraceError("line %d is not a trace record" % torn)
            try:
                line = raw.decode()
            except UnicodeDecodeError:
                raise TraceError("line %d is not text: not a trace file" % n) from None
            rec = _record(line) if line.strip() else None
            if rec is None:
                if not raw.endswith(b"\n") and seen:
                    continue  # the torn last line a crash leaves
                torn = n
                continue
            seen += 1
            yield rec
    if not seen:
        raise TraceError("no trace records (a file `pubmote bridge --trace FILE` writes "
                         "holds one JSON line per packet)")
    if torn is not None:
        raise TraceError("line %d is not a trace record" % torn)


def format_trace(path: str) -> Iterator[str]:
    """Each record as a header line and the dissector's JSON tree (or its error line)."""
    from pubmote_wire import dissect

    for rec in read_trace(path):
        stamp = time.strftime("%H:%M:%S", time.localtime(rec["t"])) + (
            "%.3f" % (rec["t"] % 1))[1:]
        arrow = "<-" if rec["dir"] == "in" else "->"
        out, _ = dissect.dissect_hex(rec["hex"])
        yield "%s %s %s %d bytes\n%s" % (stamp, arrow, rec["face"], len(rec["hex"]) // 2, out)
