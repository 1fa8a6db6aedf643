"""The bridge's journal (`pubmote bridge --journal DIR`): one JSON line per relayed message
and egress, for the data pipeline. Records go to a hidden in-progress file that is renamed
into place when it is rotated (by size and by age), so a reader never sees a growing file;
a crash loses at most the record being written, and the torn tail is trimmed on restart.

Write policy (`fsync`): "none" leaves flushing to the OS (fastest; a power cut may lose the
last seconds), "rotate" (default) fsyncs each file before it is renamed into place, "always"
fsyncs every record (slowest; survives a power cut record by record). A process crash loses
at most the record being written under every policy: each record is written with one call.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any

FSYNC_POLICIES = ("none", "rotate", "always")
PART_PREFIX = ".journal-"
PART_SUFFIX = ".jsonl.part"


def _final_name(part: Path) -> Path:
    return part.with_name(part.name[1:-len(".part")])


def trim_torn_tail(path: Path) -> int:
    """Cut a file back to its last complete, parseable JSON line; return bytes removed."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    # the last complete line may itself be torn inside (a crash mid-write of a short line)
    while keep > 0:
        start = data.rfind(b"\n", 0, keep - 1) + 1
        try:
            json.loads(data[start:keep])
            break
        except ValueError:
            keep = start
    if keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
    return len(data) - keep


class Journal:
    """Appends records to DIR; bounded files (max_bytes, max_age_s), counted records."""

    def __init__(self, directory: str | Path, *, max_bytes: int = 8 << 20,
                 max_age_s: float = 60.0, fsync: str = "rotate") -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError("journal fsync policy must be one of %s" % ", ".join(FSYNC_POLICIES))
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.fsync = fsync
        self._f: IO[bytes] | None = None
        self._part: Path | None = None
        self._opened = 0.0
        self._size = 0
        self._seq = 0
        self.counters = {"records": 0, "files": 0, "recovered_files": 0, "trimmed_bytes": 0,
                         "write_errors": 0}

    def open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.recover()

    def recover(self) -> None:
        """Put the in-progress files a crash left behind into place, torn tails trimmed."""
        for part in sorted(self.dir.glob(PART_PREFIX + "*" + PART_SUFFIX)):
            self.counters["trimmed_bytes"] += trim_torn_tail(part)
            if part.stat().st_size == 0:
                part.unlink()
                continue
            os.replace(part, _final_name(part))
            self.counters["recovered_files"] += 1

    def record(self, rec: dict[str, Any]) -> None:
        line = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        if self._f is None:
            self._start()
        assert self._f is not None
        try:
            self._f.write(line)  # one write per record: a crash tears at most this one
            self._f.flush()
            if self.fsync == "always":
                os.fsync(self._f.fileno())
        except OSError:
            self.counters["write_errors"] += 1
            return
        self.counters["records"] += 1
        self._size += len(line)
        if self._size >= self.max_bytes:
            self.rotate()

    def tick(self) -> None:
        """Call now and then (the bridge does, every second): rotates a file by age."""
        if self._f is not None and time.monotonic() - self._opened >= self.max_age_s:
            self.rotate()

    def _start(self) -> None:
        self._seq += 1
        name = "%s%d-%04d%s" % (PART_PREFIX, int(time.time() * 1000), self._seq, PART_SUFFIX)
        self._part = self.dir / name
        self._f = open(self._part, "ab")  # noqa: SIM115 - closed in rotate()
        self._opened = time.monotonic()
        self._size = 0

    def rotate(self) -> None:
        """Close the current file and rename it into place (readers see it from now on)."""
        f, part = self._f, self._part
        if f is None or part is None:
            return
        self._f = self._part = None
        f.flush()
        if self.fsync != "none":
            os.fsync(f.fileno())
        f.close()
        if self._size == 0:
            part.unlink()
            return
        os.replace(part, _final_name(part))
        self.counters["files"] += 1

    def close(self) -> None:
        self.rotate()
