"""A batch run's journal, made ready for Spark: every finished file compacted into typed
columns (columns.py) and the rows counted from the columns' footers, in child processes
for a large journal, and started before the JVM so the two overlap (the CLI's batch run).

For a large journal the work is the children's: the driver never holds pyarrow's buffers
(its allocator kept 180 MB of RSS at 10M rows) while the JVM peaks, and the readings
decode, which is Python, runs on both cores (one per process) instead of one under the
GIL. This module imports no pyarrow (pyspark itself loads it in the driver, through
pyspark.testing.utils, on the first call into the JVM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from .errors import PipelineError
from .paths import JOURNAL_GLOB, make_columns_dir

# A journal this large goes to child processes; a smaller one (the tests', a --follow
# job's new file) stays in the driver: a child costs about 0.5 CPU s to start.
CHILD_BYTES = 32_000_000

# A journal up to this size is a short run for Spark's JVM (session.spark_session's
# `short`): 250,000 bench rows. Measured on 2 cores, HotSpot's first compiler alone
# against both, one run each: 1,000 rows 8.6-10.1 s and 11-13 CPU s against 11.1-11.3 s
# and 19 CPU s; 100,000 rows 9.7 s and 14 CPU s against 12.1 s and 21; 400,000 rows
# 15.5-19.6 s and 19-21 CPU s against 16.6-18.2 s and 28-30; 1M rows 26.5 s against
# 22.6 s (26 CPU s against 37): there the optimised code pays for its compiling.
SHORT_RUN_BYTES = 64_000_000


class Backlog(NamedTuple):
    """A journal's columns, ready: the files (one per journal file, oldest first), how
    many were compacted now, and the rows and unusable rows (no time or no outcome)."""

    files: list[Path]
    compacted: int
    rows: int
    unusable: int


def prepare(journal: str | Path, reading_key: str | None = None) -> Backlog:
    """Compact the journal's finished files that have no columns yet and count the rows."""
    out = make_columns_dir(journal, reading_key)
    files = sorted(Path(journal).glob(JOURNAL_GLOB))
    todo = [f for f in files if not (out / (f.stem + ".parquet")).exists()]
    # (nothing to compact: the footers are read here, a child's start would cost more)
    if todo and len(files) >= 2 and sum(f.stat().st_size for f in files) >= CHILD_BYTES:
        n, rows, unusable = _in_children(files, out, reading_key,
                                         min(len(files), len(todo), os.cpu_count() or 2))
    else:
        from .columns import compact, counts

        n = compact(journal, reading_key)[1]
        rows, unusable = counts([out / (f.stem + ".parquet") for f in files])
    return Backlog([out / (f.stem + ".parquet") for f in files], n, rows, unusable)


def short_run(journal: str | Path) -> bool:
    """Whether a batch run over `journal` is short enough for session.spark_session's
    `short` (its JSON lines at most SHORT_RUN_BYTES)."""
    return sum(f.stat().st_size for f in Path(journal).glob(JOURNAL_GLOB)) <= SHORT_RUN_BYTES


def prepare_soon(journal: str | Path, reading_key: str | None = None) -> Future[Backlog]:
    """prepare() in a background thread (its work in child processes for a large
    journal), started before the JVM: the journal is compacted while Spark starts."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pubmote-backlog")
    try:
        return pool.submit(prepare, journal, reading_key)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


def _in_children(files: list[Path], out: Path, reading_key: str | None,
                 workers: int) -> tuple[int, int, int]:
    """columns.compact_and_count over `files` in `workers` child processes (`python -m
    pubmote.pipeline.columns`; not multiprocessing, which re-runs a caller's script that
    has no main guard), every workers-th file each: the sizes even out."""
    here = str(Path(__file__).resolve().parents[2])  # the folder holding pubmote
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])),
        # one thread each: 10M rows compacted in 16.5 CPU s instead of 17.4 (PROFILE.md)
        PUBMOTE_COLUMNS_THREADS="0")
    procs = [subprocess.Popen(
        [sys.executable, "-m", "pubmote.pipeline.columns",
         json.dumps([str(out), reading_key, [str(f) for f in files[i::workers]]])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for i in range(workers)]
    total, errors = [0, 0, 0], []
    for p in procs:
        stdout, stderr = p.communicate()
        if p.returncode:
            errors.append((stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1])
            continue
        for i, x in enumerate(json.loads(stdout)):
            total[i] += int(x)
    if errors:
        raise PipelineError("compacting the journal into %s failed: %s" % (out, errors[0]))
    return total[0], total[1], total[2]
