"""Streaming mode (`--follow`): the batch transformation as Structured Streaming queries
over the journal folder, one per table, each with its own checkpoint and a Parquet file
sink. Spark's checkpoint (offsets, state, commits) and the file sink's _spark_metadata log
make it exactly-once: killed at any moment (kill -9 included) and restarted with the same
--out and --checkpoint, no window is lost or counted twice. Windows are written once the
watermark passes their end (append mode), so the newest ones appear after `window +
watermark` of event time. Read the sinks with Spark (spark.read.parquet), which follows
_spark_metadata: files of a batch cut short by a kill are in the folder but not in it.
Each batch's progress line says its lag (lag.py: from the bridge putting the batch's
oldest journal file in place to the batch's commit); a job falling behind says so every
10 s, batch or not; the lag over the run is the job's last line but one."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import holder
from .columns import COLUMNS_GLOB, compact
from .errors import Log, PipelineError
from .lag import LagMeter
from .schema import COLUMNS_SCHEMA
from .transform import LATE_MS, TABLE_NAMES, prepare, tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


def check_sink(path: Path) -> None:
    if path.exists() and any(path.iterdir()) and not (path / "_spark_metadata").exists():
        raise PipelineError("%s holds tables of a batch run; give --follow its own --out "
                            "(a stream's sink must be written by the stream only)" % path)


def check_checkpoint(checkpoint: Path) -> None:
    """Refuse a checkpoint whose source read the journal's JSON files (pubmote before the
    typed columns): its log names .jsonl files, so every .parquet file would be new to it
    and every window counted twice."""
    for f in checkpoint.glob("*/sources/*/*"):
        if f.is_file() and '.jsonl"' in f.read_text(errors="replace"):
            raise PipelineError("%s is the checkpoint of an older pubmote pipeline (it read "
                                "the journal's JSON lines); give --follow a new --out and "
                                "--checkpoint" % checkpoint)


def start(spark: SparkSession, journal: str | Path, out: str | Path,
          checkpoint: str | Path, *, window: str, watermark: str, trigger_s: float,
          late_ms: float = LATE_MS, max_files: int | None = None,
          reading_key: str | None = None) -> list[StreamingQuery]:
    """Start one query per table; they run until stopped."""
    Path(journal).mkdir(parents=True, exist_ok=True)  # the bridge may start after us
    check_checkpoint(Path(checkpoint))
    columns, _ = compact(journal, reading_key)
    # malformed lines are rows without t_bridge in the columns: prepare() drops them
    reader = spark.readStream.schema(COLUMNS_SCHEMA).option("pathGlobFilter", COLUMNS_GLOB)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    queries = []
    # One query (and one read of each new file) per table: a file sink is exactly-once only
    # as its query's only sink; one query writing both tables by foreachBatch would not be.
    for name in TABLE_NAMES:
        sink = Path(out) / name
        check_sink(sink)
        df = tables(prepare(reader.parquet(str(columns))), window, watermark, late_ms,
                    exact=False)[name]
        queries.append(df.writeStream.queryName(name).format("parquet").outputMode("append")
                       .option("path", str(sink))
                       .option("checkpointLocation", str(Path(checkpoint) / name))
                       .trigger(processingTime="%g seconds" % trigger_s).start())
    return queries


# a journal file waiting longer than this is said, every WARN_EVERY_S, until read
BEHIND_S = 10.0
WARN_EVERY_S = 10.0


def _done_ms(p: dict[str, Any]) -> float:
    """When a batch finished: its start (progress `timestamp`, UTC) plus its duration."""
    start = dt.datetime.fromisoformat(str(p["timestamp"]).replace("Z", "+00:00"))
    return start.timestamp() * 1000 + float((p.get("durationMs") or {})
                                            .get("triggerExecution") or 0)


def _describe(name: str, p: dict[str, Any], lag_ms: float | None = None) -> tuple[bool, str]:
    """(anything happened, one progress line) for a batch's progress report; `lag_ms`:
    from the bridge putting the batch's oldest journal file in place to its commit."""
    wm = (p.get("eventTime") or {}).get("watermark", "-")
    ops = p.get("stateOperators") or []
    # append mode: a window leaves the state exactly when it is written to the sink
    closed = sum(int(s.get("numRowsRemoved") or 0) for s in ops)
    # a Spark Connect client's progress may leave the total out: its sources' sum
    rows_in = int(p.get("numInputRows") or sum(int(s.get("numInputRows") or 0)
                                                for s in p.get("sources") or []))
    late = sum(int(s.get("numRowsDroppedByWatermark") or 0) for s in ops)
    took_ms = float((p.get("durationMs") or {}).get("triggerExecution") or 0)
    return bool(rows_in or closed), (
        "%s: batch %s, %d rows in, %d windows written, %d open, watermark %s%s%s"
        % (name, p.get("batchId"), rows_in, closed,
           sum(int(s.get("numRowsTotal") or 0) for s in ops), wm,
           # the batch's own time, and the lag it ends (the wait for it included)
           ", took %.1f s, lag %.1f s" % (took_ms / 1000, lag_ms / 1000)
           if lag_ms is not None else "",
           ", %d rows dropped by watermark" % late if late else ""))


def _report_batches(q: StreamingQuery, last: str, meter: LagMeter, log: Log) -> str:
    """Log the progress reports of the query after the one at time `last` (several may
    have come between two looks), noting the lag of each batch that ran; return the
    newest report's time. Spark also reports an idle trigger (no new file), under the
    id of the batch still to come: only a report with `addBatch` is a batch run."""
    p = q.lastProgress
    if not p or str(p["timestamp"]) <= last:
        return last
    reports = [dict(x) for x in q.recentProgress if str(x["timestamp"]) > last] or [dict(p)]
    for b in reports:
        ran = "addBatch" in (b.get("durationMs") or {})
        busy, line = _describe(q.name or "", b, meter.batch_done(
            int(b["batchId"]), _done_ms(b)) if ran else None)
        if busy:
            log(line)
    return max(str(b["timestamp"]) for b in reports)


def _stop_all(queries: list[StreamingQuery], log: Log) -> None:
    """Stop the queries and wait (up to 30 s each) until they have. On a Spark Connect
    server that is itself stopping or gone, say so and go on: the queries end with it."""
    for q in queries:
        try:
            q.stop()
            deadline = time.monotonic() + 30
            while q.isActive and time.monotonic() < deadline:
                time.sleep(0.1)
        except Exception as e:  # noqa: BLE001 - any error of a gone server's client
            log("could not stop stream %s: %s" % (q.name, (str(e).splitlines() or [""])[0]))


def follow(spark: SparkSession, journal: str | Path, out: str | Path,
           checkpoint: str | Path, *, window: str, watermark: str, trigger_s: float = 5.0,
           late_ms: float | None = None, max_files: int | None = None,
           reading_key: str | None = None, log: Log = print) -> int:
    """Run the streaming queries until SIGINT/SIGTERM, printing each batch's progress;
    the exit status: 130 after SIGINT, 0 after SIGTERM."""
    holder.wait_for_previous(Path(checkpoint), log)
    holder.hold(Path(checkpoint))
    queries = start(spark, journal, out, checkpoint, window=window, watermark=watermark,
                    trigger_s=trigger_s, late_ms=LATE_MS if late_ms is None else late_ms,
                    max_files=max_files, reading_key=reading_key)
    log("following %s -> %s (checkpoint %s); stop with Ctrl-C" % (journal, out, checkpoint))
    stop = threading.Event()
    got: list[int] = []

    def on_signal(sig: int, _frame: object) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    failed: list[BaseException] = []

    def compactor() -> None:
        # new journal files into columns, at twice the trigger's pace: a file waits at
        # most half a trigger before the stream can see it
        try:
            while not stop.wait(min(1.0, trigger_s / 2)):
                compact(journal, reading_key)
        except BaseException as e:  # noqa: BLE001 - reported by the main loop
            failed.append(e)
            stop.set()

    thread = threading.Thread(target=compactor, name="pubmote-compactor", daemon=True)
    thread.start()
    seen: dict[str, str] = {}
    meters = {q.name or "": LagMeter(journal, Path(checkpoint) / (q.name or "")) for q in queries}
    checked = 0.0
    try:
        while not stop.wait(1.0):
            for q in queries:
                name = q.name or ""
                if not q.isActive:
                    err = q.exception()
                    raise PipelineError("stream %s stopped: %s" % (name, err or "no error given"))
                seen[name] = _report_batches(q, seen.get(name, ""), meters[name], log)
            now = time.time()
            if now - checked >= WARN_EVERY_S:
                checked = now
                # the slowest query's backlog: a job falling behind says so, batch or not
                n, age_ms = max(m.waiting(now * 1000) for m in meters.values())
                if n and age_ms > BEHIND_S * 1000:
                    log("behind: %d journal file%s in no committed batch yet, the oldest "
                        "put in place %.1f s ago" % (n, "" if n == 1 else "s", age_ms / 1000))
        if failed:
            raise PipelineError("compacting the journal failed: %s" % failed[0])
    finally:
        stop.set()
        thread.join()
        _stop_all(queries, log)
        for name, m in meters.items():
            log("%s: %s" % (name, m.summary()))
    log("stopped; restart with the same --out and --checkpoint to go on where it stopped")
    # as a shell reports it: 128 + SIGINT after Ctrl-C, 0 after SIGTERM (a service stopped)
    return 128 + signal.SIGINT if got[:1] == [signal.SIGINT] else 0
