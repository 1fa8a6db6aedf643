"""Streaming (--follow) is exactly-once: the job is killed with kill -9 twice while it
works, restarted each time, and its tables equal the batch recomputation of the same
journal, row for row, with no window lost or counted twice. The first run is local mode
(a JVM of its own), the others run on the shared Spark Connect server (--remote) from the
same checkpoint: the two modes run the same queries, and a restarted remote client takes
over the streams a killed one left running on the server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from jobs import PipelineJob, committed_batches, jvms

import oracle
from pubmote import procs
from pubmote.pipeline.batch import compute
from pubmote.pipeline.synth import records, write_journal


def follow_job(journal: Path, out: Path, log: Path, remote: str | None = None) -> PipelineJob:
    """`pubmote pipeline --follow`, a file a micro-batch: on local[2], or on the server."""
    where = ["--remote", remote] if remote else [
        "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"]
    return PipelineJob([str(journal), "--out", str(out), "--follow", "--trigger-seconds",
                        "0.3", "--max-files-per-trigger", "1", *where], log)


@pytest.mark.timeout(900)  # a JVM's start and some 30 micro-batches on 2 busy cores
def test_follow_is_exactly_once_across_kill_9(spark: Any, connect_url: str,
                                              tmp_path: Path) -> None:
    journal, out, log = tmp_path / "journal", tmp_path / "out", tmp_path / "job.log"
    ckpt = out / "_checkpoint"
    # 12.5 min of event time, some readings late or too late (the same windows in both)
    recs = list(records(3000, boards=4, subscribers=2, seed=11, late=True))
    chunks = [recs[i:i + 1200] for i in range(0, len(recs), 1200)]
    for i, c in enumerate(chunks[:4]):
        write_journal(journal, iter(c), start_index=i)

    kills = 0
    for n in range(2):  # two runs killed with -9 while a batch is in flight
        job = follow_job(journal, out, log, connect_url if n else None)
        try:
            base = committed_batches(ckpt, "commits")
            job.wait_for(lambda b=base: committed_batches(ckpt, "commits") >= b + 2, 300,
                         "two committed batches")
            if n == 0:  # a resident job's JVM took its whole heap as it started
                (pid, line), = jvms(job.p.pid).items()
                assert "-Xms480m -XX:+AlwaysPreTouch" in line, line
                rss_kib = procs.status_kb("VmRSS", pid)
                assert rss_kib is not None and rss_kib > 480 << 10, rss_kib
            # aim for the worst moment: a batch planned (offsets written) but not committed
            deadline = time.monotonic() + 5
            while (committed_batches(ckpt, "offsets") <= committed_batches(ckpt, "commits")
                   and time.monotonic() < deadline):
                time.sleep(0.005)
            job.kill9()
            kills += 1
        finally:
            if job.p.poll() is None:
                job.stop()
        if n == 0:  # the bridge went on writing while the job was down
            for i, c in enumerate(chunks[4:], start=4):
                write_journal(journal, iter(c), start_index=i)
    assert kills == 2

    # the last run: a message far ahead in event time moves the watermark past every
    # window (each table's watermark follows the records it aggregates)
    last = max(r["t_bridge"] for r in recs)
    write_journal(journal, iter([{"t_bridge": last + 600_000, "topic": "/sentinel",
                                  "origin": "sentinel", "ingress": "test",
                                  "outcome": "relayed"}]), start_index=99)
    rows, tables, _ = compute(spark, journal, window="1 minute", watermark="1 minute")
    want_w = oracle.table_rows(tables["windows"].where("origin != 'sentinel'"),
                               ("window_start", "topic", "origin"))
    want_h = oracle.table_rows(tables["health"].where("node != 'sentinel'"),
                               ("window_start", "node"))
    rows.unpersist()
    assert len(want_w) >= 50 and len(want_h) >= 70

    def sink_rows(name: str) -> int:
        path = out / name
        if not (path / "_spark_metadata").exists():
            return 0
        return int(spark.read.parquet(str(path)).count())

    def sink_log(name: str) -> list[str]:
        meta = out / name / "_spark_metadata"
        return sorted(os.listdir(meta)) if meta.is_dir() else []

    # a sink's rows change only when it commits a batch to its metadata log: count them
    # with Spark then, not on every poll (a Spark job each, beside the streaming job)
    seen: list[object] = [None]
    written = {"windows": 0, "health": 0}

    def all_windows_written() -> bool:
        logs = (sink_log("windows"), sink_log("health"))
        if logs == seen[0]:
            return False
        seen[0] = logs
        written.update(windows=sink_rows("windows"), health=sink_rows("health"))
        return written["windows"] >= len(want_w) and written["health"] >= len(want_h)

    job = follow_job(journal, out, log, connect_url)
    try:
        # once this run has taken over the queries (a run killed on the server goes on
        # until then, and may have read the sentinel), a file later still: a restarted
        # query runs no batch without new data, so the windows the watermark passed in the
        # last batch before the takeover come with the next file (README)
        job.wait_for(lambda: log.read_text().count("pipeline: following") == 3, 300,
                     "the last run to start")
        write_journal(journal, iter([{"t_bridge": last + 1_200_000, "topic": "/sentinel",
                                      "origin": "sentinel", "ingress": "test",
                                      "outcome": "relayed"}]), start_index=100)
        try:
            job.wait_for(all_windows_written, 300, "every window")
        except AssertionError as e:  # slow, or a window lost: which one it is
            raise AssertionError("rows written: windows %d of %d, health %d of %d; %s" % (
                written["windows"], len(want_w), written["health"], len(want_h), e)) from e
    finally:
        job.stop()
    # (the first sentinel's window, closed by the second, is not in the journal's tables)
    got_w = oracle.table_rows(spark.read.parquet(str(out / "windows")).where(
        "origin != 'sentinel'"), ("window_start", "topic", "origin"))
    got_h = oracle.table_rows(spark.read.parquet(str(out / "health")).where(
        "node != 'sentinel'"), ("window_start", "node"))
    oracle.assert_same(got_w, want_w)  # table_rows fails on a window written twice
    oracle.assert_same(got_h, want_h)
    assert "stopped; restart with the same --out" in log.read_text()
