"""A --follow job's lag read from a checkpoint laid out as Spark writes it (the file
source's log, plain and compacted, and the commit log): no Spark needed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pubmote.pipeline.lag import LagMeter, committed_lags, percentile


def put(journal: Path, name: str, t_ms: float) -> None:
    f = journal / name
    f.write_text("{}\n")
    os.utime(f, ns=(int(t_ms * 1e6), int(t_ms * 1e6)))


def log_find(ckpt: Path, find: int, entries: list[tuple[str, float, int]],
             compact: bool = False) -> None:
    """The file source's log of find `find` (entries: name, time, find)."""
    src = ckpt / "sources" / "0"
    src.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": "file:///j/.columns/%s" % p, "timestamp": t,
                                  "batchId": b}) for p, t, b in entries]
    (src / ("%d.compact" % find if compact else str(find))).write_text("\n".join(lines))


def log_batch(ckpt: Path, batch_id: int, upto: int, done_ms: float) -> None:
    """Query batch `batch_id`: its offsets (the source's finds read up to `upto`), committed
    at done_ms."""
    for d in ("offsets", "commits"):
        (ckpt / d).mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(batch_id)).write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{"logOffset":%d}' % upto)
    c = ckpt / "commits" / str(batch_id)
    c.write_text("v1\n{}")
    os.utime(c, ns=(int(done_ms * 1e6), int(done_ms * 1e6)))


def test_lag_of_batches_and_files_waiting(tmp_path: Path) -> None:
    journal, ckpt = tmp_path / "j", tmp_path / "ckpt" / "windows"
    journal.mkdir()
    now = time.time() * 1000
    for i, age_s in enumerate((60, 50, 40, 30)):
        put(journal, "journal-%06d.jsonl" % i, now - age_s * 1000)
    meter = LagMeter(journal, ckpt)
    n, oldest = meter.waiting(now)
    assert n == 4 and abs(oldest - 60_000) < 1  # nothing read: all four wait
    log_find(ckpt, 0, [("journal-000000.parquet", now - 60_000, 0),
                       ("journal-000001.parquet", now - 50_000, 0)])
    log_batch(ckpt, 0, 0, now - 45_000)
    assert meter.batch_done(0, now - 45_000) == 15_000  # the batch's oldest file
    n, oldest = meter.waiting(now)
    assert n == 2 and abs(oldest - 40_000) < 1
    log_batch(ckpt, 1, 0, now - 44_000)  # a batch that only moved the watermark
    assert meter.batch_done(1, now - 44_000) is None
    # two finds read by one batch; the second find's log compacted (it holds the first)
    log_find(ckpt, 1, [("journal-000002.parquet", now - 40_000, 1)])
    log_find(ckpt, 2, [("journal-000000.parquet", now - 60_000, 0),
                       ("journal-000001.parquet", now - 50_000, 0),
                       ("journal-000002.parquet", now - 40_000, 1),
                       ("journal-000003.parquet", now - 30_000, 2)], compact=True)
    log_batch(ckpt, 2, 2, now - 28_000)
    assert meter.batch_done(2, now - 28_000) == 12_000
    assert meter.waiting(now) == (0, 0.0)
    assert meter.summary() == "lag over 4 journal files: p50 5.0 s, p99 15.0 s, max 15.0 s"
    assert [round(lag) for _, lag in committed_lags(ckpt)] == [15_000, 5_000, 12_000, 2_000]
    # a restarted job knows what its checkpoint read: nothing waits
    assert LagMeter(journal, ckpt).waiting(now) == (0, 0.0)


def test_percentile() -> None:
    assert percentile([], 0.99) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(x) for x in range(1, 101)], 0.99) == 99.0


class FakeQuery:
    """What the job reads of a streaming query: its progress reports."""

    name = "windows"

    def __init__(self) -> None:
        self.recentProgress: list[dict[str, Any]] = []

    @property
    def lastProgress(self) -> dict[str, Any] | None:  # noqa: N802 - Spark's name
        return self.recentProgress[-1] if self.recentProgress else None

    def report(self, batch_id: int, t_ms: float, rows: int, ran: bool) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_ms / 1000))
        self.recentProgress.append({
            "batchId": batch_id, "timestamp": "%s.%03dZ" % (stamp, t_ms % 1000),
            "numInputRows": rows, "stateOperators": [], "sources": [],
            "durationMs": {"triggerExecution": 1000, **({"addBatch": 900} if ran else {})}})


def test_every_batch_between_two_looks_is_reported_idle_triggers_are_not(
        tmp_path: Path) -> None:
    """Spark reports an idle trigger under the id of the batch still to come: the batch
    that then runs is reported all the same, with its lag, as are batches that ran
    between two looks."""
    from pubmote.pipeline.stream import _report_batches

    journal, ckpt = tmp_path / "j", tmp_path / "ckpt" / "windows"
    journal.mkdir()
    now = time.time() * 1000
    for i in range(3):
        put(journal, "journal-%06d.jsonl" % i, now - 30_000 + i * 1000)
        log_find(ckpt, i, [("journal-%06d.parquet" % i, now - 30_000 + i * 1000, i)])
    meter, q, lines = LagMeter(journal, ckpt), FakeQuery(), []
    q.report(0, now - 29_000, 0, ran=False)  # idle, under the id of the batch to come
    last = _report_batches(q, "", meter, lines.append)  # type: ignore[arg-type]
    assert lines == []
    for b in range(3):  # three batches, one file each, looked at once
        log_batch(ckpt, b, b, now - 20_000 + b * 1000)
        q.report(b, now - 21_000 + b * 1000, 100, ran=True)
    last = _report_batches(q, last, meter, lines.append)  # type: ignore[arg-type]
    assert [line.split(",")[0] for line in lines] == ["windows: batch %d" % b for b in range(3)]
    assert all(line.endswith("took 1.0 s, lag 10.0 s") for line in lines), lines
    assert meter.waiting(now) == (0, 0.0) and meter.files == 3
    assert _report_batches(q, last, meter, lines.append) == last  # type: ignore[arg-type]
    assert len(lines) == 3
