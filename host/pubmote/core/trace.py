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


def read_trace(path: str) -> Iterator[dict[str, Any]]:
    """The records of a trace file; a torn last line (a crash while writing) is skipped."""
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "hex" in rec:
                yield rec


def format_trace(path: str) -> Iterator[str]:
    """Each record as a header line and the dissector's JSON tree (or its error line)."""
    from pubmote_wire import dissect

    for rec in read_trace(path):
        stamp = time.strftime("%H:%M:%S", time.localtime(rec["t"])) + (
            "%.3f" % (rec["t"] % 1))[1:]
        arrow = "<-" if rec["dir"] == "in" else "->"
        out, _ = dissect.dissect_hex(rec["hex"])
        yield "%s %s %s %d bytes\n%s" % (stamp, arrow, rec["face"], len(rec["hex"]) // 2, out)
