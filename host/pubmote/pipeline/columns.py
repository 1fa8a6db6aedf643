"""Typed columns of the journal: each finished journal file (JSON lines, as the bridge
writes it) compacted once into a Parquet file beside it (JOURNAL/.columns/), with the
pipeline's schema and the reading already decoded. Spark then reads columns with an
explicit schema: no JSON parse and no Python UDF in Spark (bench/pipeline/PROFILE.md).

The bridge's journal stays what it is (append-only JSON lines, crash-safe, no pyarrow on
the gateway); compaction is the pipeline's, done by its driver with pyarrow's C++ JSON
reader and cbor2. A columns file appears by a link from a hidden temporary file, never
overwriting one already there: a reader (the --follow stream) sees each file once and
complete, and two pipeline runs compacting the same journal at once write the same bytes.
Journal files are immutable once in place, so a columns file is never stale.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.json as pj  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from .paths import COLUMNS_GLOB, JOURNAL_GLOB, columns_dir, make_columns_dir
from .readings import readings_of

__all__ = ["COLUMNS", "COLUMNS_GLOB", "JOURNAL_GLOB", "columns_dir", "compact", "counts",
           "read_journal_file"]


# What the JSON reader parses of a record (other fields are skipped, not parsed).
_READ = pa.schema([
    ("t_bridge", pa.float64()), ("topic", pa.string()), ("origin", pa.string()),
    ("egress", pa.string()), ("outcome", pa.string()), ("latency_ms", pa.float64()),
    ("payload", pa.string()), ("reconnect", pa.bool_()), ("t_taken", pa.float64()),
])
# What a columns file holds: the record's fields the tables use, payload decoded.
COLUMNS = pa.schema([f for f in _READ if f.name != "payload"] + [("reading", pa.float64())])
UNUSABLE_KEY = "pubmote.unusable_rows"
# pyarrow's JSON reader parses a file in threads; a compaction child (backlog.py) runs with
# PUBMOTE_COLUMNS_THREADS=0: the children are the parallelism, one per core
_READ_OPTIONS = pj.ReadOptions(use_threads=os.environ.get("PUBMOTE_COLUMNS_THREADS") != "0")
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "t_bridge": (int, float), "latency_ms": (int, float), "reconnect": (bool,),
    "t_taken": (int, float),
    "topic": (str,), "origin": (str,), "egress": (str,), "outcome": (str,), "payload": (str,)}


def _field(rec: dict[str, Any], name: str) -> Any:
    """rec[name] if it has the field's JSON type (a bool is no number), else None."""
    v = rec.get(name)
    if not isinstance(v, _JSON_TYPES[name]) or (isinstance(v, bool) and name != "reconnect"):
        return None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v


def _read_lines(path: Path) -> pa.Table:
    """The slow, forgiving reader for a file pyarrow refuses: a line that is not a JSON
    object is a row of NULLs (counted as unusable, as Spark's PERMISSIVE mode did), a
    field of the wrong type is NULL. Bridge files never need it (torn tails are trimmed)."""
    rows: list[dict[str, Any]] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        rec = rec if isinstance(rec, dict) else {}
        rows.append({f.name: _field(rec, f.name) for f in _READ})
    return pa.Table.from_pylist(rows, schema=_READ)


def read_journal_file(path: Path, reading_key: str | None = None) -> pa.Table:
    """One journal file as a table of COLUMNS (relayed rows' payloads decoded)."""
    # pyarrow's reader parses the whole file in C++ threads; it refuses a file with one
    # malformed line, which then takes the forgiving reader
    try:
        t = pj.read_json(path, read_options=_READ_OPTIONS, parse_options=pj.ParseOptions(
            explicit_schema=_READ, unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid:
        t = _read_lines(path)
    payload = t.column("payload")
    # only relayed rows carry the message's payload (egress rows repeat none)
    idx = pc.indices_nonzero(pc.and_kleene(pc.equal(t.column("outcome"), "relayed"),
                                           pc.is_valid(payload)))
    readings: list[float | None] = [None] * t.num_rows
    for i, x in zip(idx.to_pylist(), readings_of(payload.take(idx).to_pylist(), reading_key),
                    strict=True):
        readings[i] = x
    t = t.drop_columns(["payload"]).append_column("reading", pa.array(readings, pa.float64()))
    return t.select(COLUMNS.names).cast(COLUMNS)


def counts(files: list[Path]) -> tuple[int, int]:
    """(rows, unusable rows: no time or no outcome) of columns files, from their footers."""
    rows = unusable = 0
    for f in files:
        meta = pq.read_metadata(f)
        rows += meta.num_rows
        unusable += int((meta.metadata or {}).get(UNUSABLE_KEY.encode(), b"0"))
    return rows, unusable


def compact_and_count(files: list[Path], out: Path, reading_key: str | None,
                      ) -> tuple[int, int, int]:
    """(files compacted now, rows, unusable rows) of journal files, each compacted into
    out unless it has its columns file: a compaction child's work (backlog.py)."""
    n = 0
    for f in files:
        if not (out / (f.stem + ".parquet")).exists():
            n += _compact_file(f, out, reading_key)
            pa.default_memory_pool().release_unused()  # the next file reuses less
    return (n, *counts([out / (f.stem + ".parquet") for f in files]))


def compact(journal: str | Path, reading_key: str | None = None) -> tuple[Path, int]:
    """Compact every finished journal file that has no columns file yet; return the
    columns folder and how many files were compacted now."""
    src = Path(journal)
    out = make_columns_dir(src, reading_key)
    done = {p.stem for p in out.glob(COLUMNS_GLOB)}
    todo = [f for f in sorted(src.glob(JOURNAL_GLOB)) if f.stem not in done]
    if len(todo) < 2:
        return out, sum(_compact_file(f, out, reading_key) for f in todo)
    # two files at a time: one file's readings decode (Python, under the GIL) runs beside
    # the other's JSON parse and Parquet write (pyarrow's C++, without it)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as pool:
        n = sum(pool.map(lambda f: _compact_file(f, out, reading_key), todo))
    # Arrow's allocator keeps freed pages for reuse: give them back, the JVM needs them next
    pa.default_memory_pool().release_unused()
    return out, n


def _compact_file(f: Path, out: Path, reading_key: str | None) -> int:
    """Write f's columns file into out unless there is one; 1 if written, else 0."""
    final = out / (f.stem + ".parquet")
    tmp = out / (".%s.%d.tmp" % (final.name, os.getpid()))  # hidden: readers skip it
    table = read_journal_file(f, reading_key)
    # the batch run's counts, in the footer: read back without a Spark job
    unusable = table.num_rows - pc.sum(pc.and_(pc.is_valid(table.column("t_bridge")),
                                              pc.is_valid(table.column("outcome")))).as_py()
    pq.write_table(table.replace_schema_metadata({UNUSABLE_KEY: str(unusable or 0)}), tmp)
    # the journal file's time: Spark's stream source takes new files oldest first, and
    # a window must not see a later file before an earlier one (its watermark)
    st = f.stat()
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    try:
        os.link(tmp, final)  # never replaces a file a reader may have listed
        return 1
    except FileExistsError:
        return 0  # another run compacted it first: same content
    finally:
        tmp.unlink()


if __name__ == "__main__":  # a compaction child (backlog.py): [columns folder, key, [files]]
    _out, _key, _files = json.loads(sys.argv[1])
    print(json.dumps(compact_and_count([Path(f) for f in _files], Path(_out), _key)))
