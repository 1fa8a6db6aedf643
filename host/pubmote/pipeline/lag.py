"""How far a `--follow` query is behind the journal, read from its checkpoint: a file's
lag is from the moment the bridge put the journal file in place (its time, which the
columns file keeps: columns.py) to the commit of the batch that read it. Spark's file
source logs the files it found with their times, by its own count of finds
(CHECKPOINT/QUERY/sources/0/N, one JSON object a line after a version line; every tenth
a `.compact` file holding all before it); a query batch's offsets (offsets/BATCH) say the
last find it read (`logOffset`): batches that only move the watermark read none, so the
two counts part. The commit log has a file per batch, written as it commits. Files in
the journal newer than every file read are waiting: the oldest one's age is the lag that
a stuck or slow job builds up before any batch reports it. Plain Python: the bench
reads a finished run's checkpoint with it too."""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .paths import JOURNAL_GLOB

KEEP = 4096  # lags kept for the percentiles: the last hour at a file a second


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return
    for line in lines[1:]:  # the first is the log's version, v1
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            yield e


def found_files(query_checkpoint: Path, find: int) -> list[float]:
    """The times (ms since 1970) of the files the source's find `find` logged."""
    d = query_checkpoint / "sources" / "0"
    for name in (str(find), "%d.compact" % find):
        if (d / name).exists():
            return [float(e["timestamp"]) for e in _entries(d / name)
                    if e.get("batchId") == find and "timestamp" in e]
    return []


def read_upto(query_checkpoint: Path, batch_id: int) -> int | None:
    """The source's last find that query batch `batch_id` had read (its logOffset), -1
    before any, None when the batch's offsets are not (or no longer) there."""
    for e in _entries(query_checkpoint / "offsets" / str(batch_id)):
        if "logOffset" in e:
            return int(e["logOffset"])
    return -1 if (query_checkpoint / "offsets" / str(batch_id)).exists() else None


def batch_files(query_checkpoint: Path, batch_id: int) -> list[float]:
    """The times (ms since 1970) of the files query batch `batch_id` read."""
    upto = read_upto(query_checkpoint, batch_id)
    if upto is None:
        return []
    before = read_upto(query_checkpoint, batch_id - 1) if batch_id else -1
    first = upto if before is None else before + 1  # the batch before it purged: its last
    return [t for find in range(first, upto + 1) for t in found_files(query_checkpoint, find)]


def committed_lags(query_checkpoint: Path) -> list[tuple[float, float]]:
    """(commit time, lag) in ms for every file of every committed batch of a query, oldest
    first: the bench's reading of a finished run."""
    commits = query_checkpoint / "commits"
    out: list[tuple[float, float]] = []
    ids = sorted(int(f.name) for f in commits.iterdir() if f.name.isdigit()) \
        if commits.is_dir() else []
    for b in ids:
        done = (commits / str(b)).stat().st_mtime * 1000
        out.extend((done, done - t) for t in batch_files(query_checkpoint, b))
    return out


def percentile(xs: list[float] | deque[float], p: float) -> float:
    """The smallest value with at least p of them at or below it (0.0 when empty)."""
    v = sorted(xs)
    return v[max(0, math.ceil(p * len(v)) - 1)] if v else 0.0


class LagMeter:
    """One query's lag, batch by batch, and the journal files waiting for it."""

    def __init__(self, journal: str | Path, query_checkpoint: str | Path) -> None:
        self.journal = Path(journal)
        self.ckpt = Path(query_checkpoint)
        self.lags: deque[float] = deque(maxlen=KEEP)
        self.files = 0
        self.max_ms = 0.0
        # the newest file time any batch read: a restarted job's, its last batch's
        commits = self.ckpt / "commits"
        ids = [int(f.name) for f in commits.iterdir() if f.name.isdigit()] \
            if commits.is_dir() else []
        self.newest_read_ms = 0.0
        for b in sorted(ids, reverse=True)[:50]:  # a batch without data reads no file
            times = batch_files(self.ckpt, b)
            if times:
                self.newest_read_ms = max(times)
                break

    def batch_done(self, batch_id: int, done_ms: float) -> float | None:
        """Note batch `batch_id`, finished at done_ms; the lag of its oldest file (ms), or
        None when it read no file (or the checkpoint is not on this host)."""
        times = batch_files(self.ckpt, batch_id)
        if not times:
            return None
        self.newest_read_ms = max(self.newest_read_ms, *times)
        for t in times:
            self.lags.append(max(0.0, done_ms - t))
        self.files += len(times)
        worst = max(0.0, done_ms - min(times))
        self.max_ms = max(self.max_ms, worst)
        return worst

    def waiting(self, now_ms: float) -> tuple[int, float]:
        """(journal files in place that no committed batch has read, the oldest one's age
        in ms). Spark reads files oldest first: those are the ones newer than any read."""
        ages = []
        # newest first (the bridge's names sort by time): stop at the first one read
        for f in sorted(self.journal.glob(JOURNAL_GLOB), reverse=True):
            try:
                t = f.stat().st_mtime * 1000
            except OSError:  # removed meanwhile
                continue
            if int(t) <= int(self.newest_read_ms):
                break
            ages.append(now_ms - t)
        return len(ages), max(ages, default=0.0)

    def summary(self) -> str:
        if not self.files:
            return "no journal file read"
        return ("lag over %d journal files: p50 %.1f s, p99 %.1f s, max %.1f s"
                % (self.files, percentile(self.lags, 0.5) / 1000,
                   percentile(self.lags, 0.99) / 1000, self.max_ms / 1000))
