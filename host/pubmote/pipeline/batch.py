"""Batch mode: the whole journal into Parquet tables (windows, health), rewritten on
every run."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backlog import Backlog
from .backlog import prepare as prepare_columns
from .errors import Log, PipelineError
from .paths import JOURNAL_GLOB

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def journal_files(journal: str | Path) -> list[Path]:
    d = Path(journal)
    if not d.is_dir():
        raise PipelineError("journal folder %s does not exist (pubmote bridge --journal %s "
                            "writes it)" % (d, d))
    return sorted(d.glob(JOURNAL_GLOB))


def read_columns(spark: SparkSession, journal: str | Path, reading_key: str | None = None,
                 log: Log = print, backlog: Future[Backlog] | None = None,
                 ) -> tuple[DataFrame, dict[str, Any]]:
    """The journal as Spark rows of its typed columns, compacting the files not compacted
    yet (pipeline/backlog.py) first, or taking `backlog`, that work started before Spark
    (backlog.prepare_soon), and its counts: rows, unusable rows (malformed lines, records
    without time or outcome), from the files' footers."""
    from .schema import COLUMNS_SCHEMA

    ready = backlog.result() if backlog is not None else prepare_columns(journal, reading_key)
    if ready.compacted:
        log("compacted %d journal files into typed columns in %s"
            % (ready.compacted, ready.files[0].parent))
    return (spark.read.schema(COLUMNS_SCHEMA).parquet(*map(str, ready.files)),
            {"rows": ready.rows, "unusable": ready.unusable})


def check_not_stream_sink(path: Path) -> None:
    if (path / "_spark_metadata").exists():
        raise PipelineError("%s is the sink of a `--follow` stream (it has _spark_metadata); "
                            "give the batch run its own --out" % path)


def compute(spark: SparkSession, journal: str | Path, *, window: str, watermark: str,
            late_ms: float | None = None, reading_key: str | None = None, log: Log = print,
            backlog: Future[Backlog] | None = None,
            ) -> tuple[DataFrame, dict[str, DataFrame], dict[str, Any]]:
    """The journal's rows (its typed columns), its tables, and counts: rows read and rows
    unusable (malformed lines, records without time or outcome). Each table and the report
    reads the Parquet columns again, only those it needs: cheaper than Spark's cache, which
    cost more to build than the reads it saved (bench/pipeline/PROFILE.md). The rows are
    not persisted; unpersist() on them is harmless (callers of the cached version did)."""
    from .transform import LATE_MS, prepare, tables

    rows, stats = read_columns(spark, journal, reading_key, log, backlog)
    late = LATE_MS if late_ms is None else late_ms
    return rows, tables(prepare(rows), window, watermark, late), stats


def _write(name: str, df: DataFrame, out: Path) -> int:
    """Write one table into out/name; its rows, counted as they are written (no second
    job reading them back)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    written = Observation(name)
    df.observe(written, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(
        str(out / name))
    return int(written.get["rows"])


def run_batch(spark: SparkSession, journal: str | Path, out: str | Path, *, window: str,
              watermark: str, late_ms: float | None = None, reading_key: str | None = None,
              report: str | Path | None = None,
              log: Log = print, backlog: Future[Backlog] | None = None) -> dict[str, Any]:
    """Write OUT/windows and OUT/health from every finished journal file, and with `report`
    REPORT/index.html (stats["report"]); return counts. `backlog`: the journal's
    compaction, started before Spark (backlog.prepare_soon) to overlap the JVM's start."""
    files = journal_files(journal)
    size = sum(f.stat().st_size for f in files)
    log("reading %d journal files (%.1f MB) from %s" % (len(files), size / 1e6, journal))
    out = Path(out)
    for name in ("windows", "health"):
        check_not_stream_sink(out / name)
    if not files:
        raise PipelineError("no finished journal files (journal-*.jsonl) in %s yet: the bridge "
                            "renames them into place on rotation (--journal-max-age)" % journal)
    if report is not None:
        from .report import preload

        preload()
    rows, tables, stats = compute(spark, journal, window=window, watermark=watermark,
                                  late_ms=late_ms, reading_key=reading_key, log=log,
                                  backlog=backlog)
    try:
        # both tables at once: one job's planning, code generation and last tasks leave a
        # core the other's tasks take (bench/pipeline/PROFILE.md)
        with ThreadPoolExecutor(max_workers=len(tables)) as pool:
            for name, n in zip(tables, pool.map(lambda t: _write(t[0], t[1], out), tables.items()),
                               strict=True):
                stats[name] = n
                log("wrote %s: %d rows -> %s" % (name, n, out / name))
        if report is not None:
            from .report import write_report
            from .transform import usable

            stats["report"] = write_report(spark, rows.where(usable()), out, report,
                                           journal=journal, window=window, log=log)
    finally:
        rows.unpersist()
    if stats["unusable"]:
        log("warning: %d journal lines were unusable (malformed, or no t_bridge/outcome)"
            % stats["unusable"])
    return stats
