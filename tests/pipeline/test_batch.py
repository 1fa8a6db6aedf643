"""Batch mode: the tables equal a plain-Python recomputation of the same journal;
malformed lines are counted, not fatal; clear errors for a missing journal or Java."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import oracle
from pubmote.pipeline.batch import run_batch
from pubmote.pipeline.errors import PipelineError
from pubmote.pipeline.synth import records, write_journal
from pubmote_wire import cbor

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
OPTS: dict[str, Any] = {"window": "1 minute", "watermark": "1 minute", "log": lambda _: None}


def test_batch_tables_equal_python_recomputation(spark: Any, tmp_path: Path) -> None:
    recs = list(records(2400, boards=4, subscribers=3, seed=7, late=True))
    write_journal(tmp_path / "j", iter(recs), per_file=2000)
    # what the batch must ignore: a bridge's in-progress file, a file that is not ours
    (tmp_path / "j" / ".journal-000099.jsonl.part").write_text('{"outcome":"relayed"}\n')
    (tmp_path / "j" / "notes.txt").write_text("not a journal\n")
    stats = run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    assert stats["rows"] == len(recs) and stats["unusable"] == 0
    windows = spark.read.parquet(str(tmp_path / "out" / "windows"))
    want = oracle.windows(recs)
    assert len(want) >= 4 * 10  # 10 minutes of 4 boards
    oracle.assert_same(oracle.table_rows(windows, ("window_start", "topic", "origin")), want)
    health = spark.read.parquet(str(tmp_path / "out" / "health"))
    oracle.assert_same(oracle.table_rows(health, ("window_start", "node")), oracle.health(recs))
    # the synthetic journal has drops, nacks, losses and reconnects: the checks above saw them
    assert sum(w["dropped"] for w in want.values()) > 0
    assert sum(w["lost"] for w in want.values()) > 0
    assert any(r.get("reconnect") for r in recs)
    # and readings late, too late, and taken without a clock
    assert sum(w["late"] for w in want.values()) > 0
    assert sum(w["too_late"] for w in want.values()) > 0
    assert {w["event_time"] for w in want.values()} == {"taken", "mixed"}


def test_windows_by_taken_time_late_and_too_late(spark: Any, tmp_path: Path) -> None:
    """A reading taken in one window and arriving in the next lands in the first, counted
    late; one a watermark late is counted in too_late where it arrived, and in nothing
    else; a reading without a taken-time is windowed by its arrival."""
    t0 = 1_789_999_980_000  # a window's start

    def msg(x: float, taken: float | None, arrived: float) -> dict[str, Any]:
        return {"t_bridge": t0 + arrived, "t_taken": None if taken is None else t0 + taken,
                "topic": "/t", "origin": "b", "ingress": "serial:b", "outcome": "relayed",
                "payload": cbor.dumps({"celsius": x}).hex()}

    recs = [msg(10.0, 20_000, 20_005),     # on time, window 0
            msg(30.0, 50_000, 65_000),     # taken in window 0, 15 s late: window 0, late
            msg(99.0, 10_000, 100_000),    # 90 s late: too late, counted in window 1
            msg(20.0, None, 70_000)]       # no taken-time: window 1 by arrival
    write_journal(tmp_path / "j", iter(recs))
    run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    got = oracle.table_rows(spark.read.parquet(str(tmp_path / "out" / "windows")),
                            ("window_start", "topic", "origin"))
    w0, w1 = got[(t0, "/t", "b")], got[(t0 + 60_000, "/t", "b")]
    assert (w0["messages"], w0["readings"], w0["late"], w0["too_late"]) == (2, 2, 1, 0)
    assert (w0["reading_min"], w0["reading_max"], w0["event_time"]) == (10.0, 30.0, "taken")
    assert (w1["messages"], w1["readings"], w1["late"], w1["too_late"]) == (1, 1, 0, 1)
    assert (w1["reading_max"], w1["event_time"]) == (20.0, "arrival")
    oracle.assert_same(got, oracle.windows(recs))


def test_messages_nobody_subscribed_to(spark: Any, tmp_path: Path) -> None:
    recs = list(records(120, boards=2, subscribers=0, seed=4))  # no egress at all
    write_journal(tmp_path / "j", iter(recs))
    run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    got = oracle.table_rows(spark.read.parquet(str(tmp_path / "out" / "windows")),
                            ("window_start", "topic", "origin"))
    assert got and all(r["drop_rate"] is None and r["latency_p50_ms"] is None
                       for r in got.values())
    oracle.assert_same(got, oracle.windows(recs))


def test_malformed_lines_are_counted_and_skipped(spark: Any, tmp_path: Path) -> None:
    recs = list(records(200, boards=2, subscribers=1, seed=3))
    write_journal(tmp_path / "j", iter(recs), per_file=10_000)
    bad = tmp_path / "j" / "journal-000001.jsonl"
    bad.write_text('{"outcome":"relayed","t_bridge":\n\x00\x01garbage\n{"topic":"/x"}\n')
    stats = run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    assert stats["rows"] == len(recs) + 3 and stats["unusable"] == 3
    got = oracle.table_rows(spark.read.parquet(str(tmp_path / "out" / "windows")),
                            ("window_start", "topic", "origin"))
    oracle.assert_same(got, oracle.windows(recs))


def test_batch_refuses_a_stream_sink_and_an_empty_journal(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    with pytest.raises(PipelineError, match="no finished journal files"):
        run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    with pytest.raises(PipelineError, match="does not exist"):
        run_batch(spark, tmp_path / "nope", tmp_path / "out", **OPTS)
    (tmp_path / "out" / "windows" / "_spark_metadata").mkdir(parents=True)
    write_journal(tmp_path / "j", records(10))
    with pytest.raises(PipelineError, match="sink of a `--follow` stream"):
        run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)


def test_report_has_plots_and_last_readings(spark: Any, tmp_path: Path) -> None:
    recs = list(records(600, boards=3, subscribers=2, seed=5, late=True))
    write_journal(tmp_path / "j", iter(recs))
    page = run_batch(spark, tmp_path / "j", tmp_path / "out", report=tmp_path / "rep",
                     **OPTS)["report"]
    text = page.read_text()
    for png in ("rate.png", "readings.png", "board_readings.png", "latency.png", "health.png"):
        assert ('src="%s"' % png) in text
        data = (tmp_path / "rep" / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    from pubmote.pipeline.readings import reading_of

    for b in ("board1", "board2", "board3"):
        last = [r for r in recs if r["outcome"] == "relayed" and r["origin"] == b][-1]
        row = "<td>/pubmote/demo/%s/temperature</td><td>%s</td><td>%.3f</td>" % (
            b, b, reading_of(last["payload"]))
        assert row in text
    assert "sp:127.0.0.1:40001" in text  # the health table names the subscribers too
    want = oracle.windows(recs)
    assert "<td>%d / %d</td>" % (sum(w["late"] for w in want.values()),
                                 sum(w["too_late"] for w in want.values())) in text


def test_report_series_are_plot_sized_and_exact(spark: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-board reading series equals the mean of the boards' readings per time
    bucket; with more windows than MAX_POINTS, whole windows are merged into buckets."""
    from pubmote.pipeline import report
    from pubmote.pipeline.readings import reading_of

    recs = list(records(480, boards=2, subscribers=1, seed=9))  # 4 minutes of 2 boards
    write_journal(tmp_path / "j", iter(recs))
    run_batch(spark, tmp_path / "j", tmp_path / "out", **OPTS)
    windows = spark.read.parquet(str(tmp_path / "out" / "windows"))
    t0 = min(int(oracle.event_ms(r)[0]) // 60_000 * 60_000 for r in recs if r.get("topic"))
    for points in (240, 2):
        monkeypatch.setattr(report, "MAX_POINTS", points)
        _, _, boards = report._time_series(windows)
        bucket_ms = 60_000 if points == 240 else 120_000  # 5 windows into at most 2 buckets
        want: dict[str, dict[int, list[float]]] = {}
        for r in recs:
            x = reading_of(r.get("payload")) if r["outcome"] == "relayed" else None
            if x is not None:
                b = t0 + (int(oracle.event_ms(r)[0]) - t0) // bucket_ms * bucket_ms
                want.setdefault(r["origin"], {}).setdefault(b, []).append(x)
        assert sorted(boards) == sorted(want) == ["board1", "board2"]
        for board, pts in boards.items():
            got = {int(t.timestamp() * 1000): v for t, v in pts}
            assert set(got) == set(want[board])
            assert len(got) <= points
            for b, xs in want[board].items():
                assert abs(got[b] - sum(xs) / len(xs)) < 1e-9, (board, b)


def test_cli_without_java_says_how_to_get_it(tmp_path: Path) -> None:
    write_journal(tmp_path / "j", records(10))
    env = dict(os.environ, JAVA_HOME=str(tmp_path))  # a JAVA_HOME with no bin/java
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path / "j")], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 1
    assert "Spark needs Java 17 or newer" in p.stderr and "openjdk-17" in p.stderr


def test_cli_bad_options(tmp_path: Path) -> None:
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path), "--conf", "novalue"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--conf novalue: expected KEY=VALUE" in p.stderr
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path), "--follow", "--report", "r"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "without --follow" in p.stderr
