"""The journal's typed columns (compaction), without Spark: the same rows and readings as
the JSON lines, malformed lines kept as unusable rows, each file compacted once and never
replaced, its time kept (the stream's file order)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pubmote.pipeline.columns import COLUMNS, columns_dir, compact, read_journal_file
from pubmote.pipeline.readings import reading_of
from pubmote.pipeline.synth import records, write_journal


def test_columns_hold_the_records_with_readings_decoded(tmp_path: Path) -> None:
    recs = list(records(300, boards=3, subscribers=2, seed=8))
    write_journal(tmp_path, iter(recs), per_file=400)
    # a file that is not ours and a bridge's in-progress file are not compacted
    (tmp_path / ".journal-1-0001.jsonl.part").write_text('{"outcome":"relayed"}\n')
    (tmp_path / "notes.txt").write_text("x\n")
    out, n = compact(tmp_path)
    files = sorted(out.glob("*"))
    assert out == columns_dir(tmp_path) and n == len(files) == len(recs) // 400 + 1
    got = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert pq.read_schema(files[0]).names == COLUMNS.names
    assert len(got) == len(recs)
    for g, r in zip(got, recs, strict=True):
        for k in ("t_bridge", "topic", "origin", "egress", "outcome", "latency_ms",
                  "reconnect", "t_taken"):
            assert g[k] == r.get(k), (k, g, r)
        want = reading_of(r.get("payload")) if r["outcome"] == "relayed" else None
        assert g["reading"] == want and (want is not None) == (r["outcome"] == "relayed")


def test_malformed_lines_are_rows_of_nulls(tmp_path: Path) -> None:
    f = tmp_path / "journal-000001.jsonl"
    f.write_text('{"outcome":"relayed","t_bridge":\n\x00garbage\n\n[1,2]\n'
                 '{"t_bridge":"soon","outcome":"board_up","origin":"b1"}\n'
                 '{"t_bridge":5,"outcome":"relayed","payload":"f94d60"}\n')
    rows = read_journal_file(f).to_pylist()
    assert len(rows) == 5  # the blank line is no row
    assert all(v is None for r in rows[:3] for v in r.values())
    assert rows[3]["t_bridge"] is None and rows[3]["origin"] == "b1"
    assert rows[4]["t_bridge"] == 5.0 and rows[4]["reading"] == 21.5


def test_each_file_is_compacted_once_with_its_time(tmp_path: Path) -> None:
    write_journal(tmp_path, records(100), per_file=100)
    src = sorted(tmp_path.glob("journal-*.jsonl"))
    os.utime(src[0], (1_000_000, 1_000_000))
    out, n = compact(tmp_path)
    assert n == len(src) >= 2
    first = out / (src[0].stem + ".parquet")
    assert first.stat().st_mtime == 1_000_000
    inode = first.stat().st_ino
    write_journal(tmp_path, records(10, seed=3), start_index=len(src))
    assert compact(tmp_path)[1] == 1  # only the new file
    assert first.stat().st_ino == inode  # the old ones are never rewritten
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    # another reading rule is another folder
    keyed, n = compact(tmp_path, "seq")
    assert keyed != out and n == len(src) + 1
    assert max(r["reading"] or 0 for r in pq.read_table(keyed).to_pylist()) > 1


def test_a_json_source_checkpoint_is_refused(tmp_path: Path) -> None:
    """A --follow checkpoint of the JSON-lines version names .jsonl files: with the
    columns source every window would be counted again, so it is refused."""
    import pytest

    from pubmote.pipeline.errors import PipelineError
    from pubmote.pipeline.stream import check_checkpoint

    src = tmp_path / "windows" / "sources" / "0"
    src.mkdir(parents=True)
    (src / "0").write_text('v1\n{"path":"file:///j/journal-000001.parquet","batchId":0}\n')
    check_checkpoint(tmp_path)  # a columns checkpoint goes on
    (src / "1").write_text('v1\n{"path":"file:///j/journal-000002.jsonl","batchId":1}\n')
    with pytest.raises(PipelineError):
        check_checkpoint(tmp_path)


def test_a_large_backlog_is_compacted_in_child_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch run's backlog (backlog.prepare) in child processes, as for a journal past
    CHILD_BYTES: the same columns and counts as compacting in the driver, a second run
    compacts nothing, and a child's failure is a PipelineError naming the cause."""
    from pubmote.pipeline import backlog
    from pubmote.pipeline.errors import PipelineError

    recs = list(records(500, boards=3, subscribers=2, seed=5))
    for d in ("driver", "children"):
        write_journal(tmp_path / d, iter(recs), per_file=100)
        (tmp_path / d / "journal-000099.jsonl").write_text('{"t_bridge":1,"outcome":\n')
    here = backlog.prepare(tmp_path / "driver")
    monkeypatch.setattr(backlog, "CHILD_BYTES", 0)
    there = backlog.prepare(tmp_path / "children")
    files = len(list((tmp_path / "children").glob("journal-*.jsonl")))
    assert files > 2  # both children had work
    assert (there.compacted, there.rows, there.unusable) == (files, len(recs) + 1, 1)
    assert (here.compacted, here.rows, here.unusable) == (files, len(recs) + 1, 1)
    for a, b in zip(here.files, there.files, strict=True):
        assert a.name == b.name and pq.read_table(a).equals(pq.read_table(b))
    again = backlog.prepare_soon(tmp_path / "children").result()
    assert (again.compacted, again.rows, again.files) == (0, there.rows, there.files)
    # a journal file the child cannot read: its error, not a hang or a wrong count
    bad = tmp_path / "bad"
    write_journal(bad, iter(recs), per_file=250)
    (bad / "journal-000000.jsonl").chmod(0)
    if os.access(bad / "journal-000000.jsonl", os.R_OK):  # root reads it anyway
        (bad / "journal-000000.jsonl").unlink()
        (bad / "journal-000000.jsonl").mkdir()  # a folder is unreadable for anyone
    with pytest.raises(PipelineError, match=r"compacting the journal into .* failed: .+"):
        backlog.prepare(bad)


def test_a_short_run_is_a_journal_of_at_most_short_run_bytes(tmp_path: Path) -> None:
    """What makes a batch run short (session.spark_session's `short`): the journal files'
    bytes, not the columns beside them or other files."""
    from pubmote.pipeline.backlog import SHORT_RUN_BYTES, short_run

    j = tmp_path / "j"
    j.mkdir()
    assert short_run(j)  # an empty journal
    with open(j / "journal-000000.jsonl", "wb") as f:
        f.truncate(SHORT_RUN_BYTES // 2)  # sparse: no disk written
    with open(j / "unrelated.bin", "wb") as f:
        f.truncate(SHORT_RUN_BYTES)
    assert short_run(j)
    with open(j / "journal-000001.jsonl", "wb") as f:
        f.truncate(SHORT_RUN_BYTES // 2)
    assert short_run(j)  # exactly the bound
    with open(j / "journal-000002.jsonl", "wb") as f:
        f.truncate(1)
    assert not short_run(j)


def test_spark_schema_names_the_columns_files_fields() -> None:
    # Spark reads the columns files with schema.py's schema: the same fields, in order
    # (t_taken among them: the board's taken-time, docs/protocols/event-time.md)
    from pubmote.pipeline.schema import COLUMNS_SCHEMA

    assert [f.name for f in COLUMNS_SCHEMA.fields] == COLUMNS.names
    assert "t_taken" in COLUMNS.names
