"""Pipeline benchmark: the batch job (both tables: per-topic windows and per-node health,
CBOR readings decoded) over a journal of ROWS records, on Spark in local mode and, in the
same run on the same files, the same aggregation in DuckDB: first over the journal's JSON
lines (Spark's run compacts them into typed columns, pipeline/columns.py), then over the
typed columns that leaves beside the journal (both engines read those Parquet files). Each engine runs in its own
process; we report wall time, rows/s and the peak resident memory of its whole process
tree (for Spark: the Python driver, the JVM and any Python workers), as ratios. Spark's
figure includes starting its JVM, which a long-running --follow job pays once, from the
class archive that `make setup` or a first batch run saves (pipeline/jvm_archive.py).
At the smallest size, the same job again on a warm `pubmote pipeline serve` (Spark
Connect: the job's process starts no JVM; the server has run it --warm-up-runs times),
alone and with its report: its CPU seconds and memory are the client's and the server's
during the job.

    python bench/pipeline/run.py [--rows 1000000 10000000] [--warm-up-runs 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pubmote import procs
from pubmote.boards.cable import end_process

ROOT = Path(__file__).resolve().parents[2]

SPARK_JOB = """
import json, sys, time
t0 = time.monotonic()
from pubmote.pipeline.backlog import prepare_soon, short_run
from pubmote.pipeline.session import spark_session
from pubmote.pipeline.batch import run_batch
backlog = prepare_soon(sys.argv[1])  # as `pubmote pipeline` does: while the JVM starts
spark = spark_session("local[*]", short=short_run(sys.argv[1]))
t1 = time.monotonic()
stats = run_batch(spark, sys.argv[1], sys.argv[2], window="1 minute", watermark="1 minute",
                  log=lambda _: None, backlog=backlog)
t2 = time.monotonic()
spark.stop()
print(json.dumps({"startup_s": t1 - t0, "job_s": t2 - t1, "windows": stats["windows"],
                  "health": stats["health"]}))
"""

# The same job sent to a warm `pubmote pipeline serve` (argv[3]): this process starts no
# JVM. Its log lines' times say where a warm run's time goes.
REMOTE_JOB = """
import json, sys, time
t0 = time.monotonic()
marks = []
def log(line):
    marks.append((time.monotonic() - t0, line.split(":")[0].split(" ")[0]))
from pubmote.pipeline.backlog import prepare_soon
from pubmote.pipeline.connect import remote_session
from pubmote.pipeline.batch import run_batch
backlog = prepare_soon(sys.argv[1])
spark = remote_session(sys.argv[3])
t1 = time.monotonic()
stats = run_batch(spark, sys.argv[1], sys.argv[2], window="1 minute", watermark="1 minute",
                  log=log, backlog=backlog, report=sys.argv[4] if len(sys.argv) > 4 else None)
t2 = time.monotonic()
spark.stop()
print(json.dumps({"startup_s": t1 - t0, "job_s": t2 - t1, "windows": stats["windows"],
                  "health": stats["health"], "marks": marks, "end_s": t2 - t0}))
"""

DUCKDB_JOB = """
import json, sys, time
t0 = time.monotonic()
import duckdb
from pubmote.pipeline.readings import reading_of
con = duckdb.connect()
con.create_function("reading", lambda p: reading_of(p), ["VARCHAR"], "DOUBLE",
                    null_handling="special", side_effects=False)
t1 = time.monotonic()
src, out, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
cols = ("{t_board: 'BIGINT', t_bridge: 'DOUBLE', t_taken: 'DOUBLE', topic: 'VARCHAR', "
        "origin: 'VARCHAR', ingress: 'VARCHAR', egress: 'VARCHAR', size: 'BIGINT', "
        "outcome: 'VARCHAR', latency_ms: 'DOUBLE', payload: 'VARCHAR', reconnect: 'BOOLEAN'}")
if fmt == "json":  # the journal's JSON lines, payloads decoded by the pipeline's decoder
    rows = ("SELECT *, CASE WHEN outcome = 'relayed' THEN reading(payload) END AS reading "
            "FROM read_json('%s/journal-*.jsonl', format='newline_delimited', columns=%s)"
            % (src, cols))
else:  # the journal's typed columns, as `pubmote pipeline` compacted them
    rows = "SELECT * FROM read_parquet('%s/.columns/journal-*.parquet')" % src
# the pipeline's event time (transform.py): the taken-time, never after the arrival; the
# arrival without one, or for a message a watermark (1 minute) late, counted as too late
con.execute(
    "CREATE TEMP TABLE j AS SELECT *, make_timestamp(CAST(t_bridge * 1000 AS BIGINT)) AS ts, "
    "make_timestamp(CAST(CASE WHEN too_late THEN t_bridge ELSE coalesce(taken, t_bridge) END "
    "* 1000 AS BIGINT)) AS ev FROM (SELECT *, coalesce(t_bridge - taken >= 60000, false) "
    "AS too_late FROM (SELECT *, CASE WHEN t_taken IS NOT NULL THEN least(t_taken, t_bridge) "
    "END AS taken FROM (%s) WHERE t_bridge IS NOT NULL AND outcome IS NOT NULL))" % rows)
egress = "outcome IN ('delivered', 'dropped', 'nacked')"
ok = "NOT too_late AND "
con.execute(
    "COPY (SELECT time_bucket(INTERVAL 1 minute, ev) AS window_start, topic, origin, "
    "count_if(%(ok)s outcome = 'relayed') AS messages, "
    "count(reading) FILTER (WHERE NOT too_late) AS readings, "
    "min(reading) FILTER (WHERE NOT too_late), avg(reading) FILTER (WHERE NOT too_late), "
    "max(reading) FILTER (WHERE NOT too_late), "
    "quantile_disc(latency_ms, 0.5) FILTER (WHERE %(ok)s outcome = 'delivered') AS p50, "
    "quantile_disc(latency_ms, 0.99) FILTER (WHERE %(ok)s outcome = 'delivered') AS p99, "
    "count_if(%(ok)s outcome = 'delivered') AS delivered, "
    "count_if(%(ok)s outcome IN ('dropped', 'nacked')) AS dropped, "
    "count_if(%(ok)s outcome = 'fetch_failed') AS lost, "
    "count_if(%(ok)s outcome IN ('dropped', 'nacked')) / "
    "nullif(count_if(%(ok)s %(egress)s), 0) AS drop_rate, "
    "count_if(%(ok)s outcome = 'relayed' AND t_bridge - taken > 2000) AS late, "
    "count_if(too_late AND outcome = 'relayed') AS too_late, "
    "CASE WHEN count_if(too_late OR taken IS NULL) = 0 THEN 'taken' "
    "WHEN count_if(NOT too_late AND taken IS NOT NULL) = 0 THEN 'arrival' ELSE 'mixed' END "
    "AS event_time "
    "FROM j WHERE topic IS NOT NULL AND outcome IN ('relayed', 'fetch_failed', 'delivered', "
    "'dropped', 'nacked') GROUP BY ALL) TO '%(out)s/windows.parquet'"
    % {"ok": ok, "egress": egress, "out": out})
con.execute(
    "COPY (SELECT time_bucket(INTERVAL 1 minute, ts) AS window_start, "
    "CASE WHEN %s THEN egress ELSE origin END AS node, "
    "count_if(outcome = 'relayed') AS published, count_if(outcome = 'delivered'), "
    "count_if(outcome IN ('dropped', 'nacked')), count_if(outcome = 'fetch_failed'), "
    "count_if(outcome = 'board_up'), count_if(outcome = 'board_up' AND reconnect), "
    "count_if(outcome = 'board_down') FROM j WHERE node IS NOT NULL GROUP BY ALL) "
    "TO '%s/health.parquet'" % (egress, out))
t2 = time.monotonic()
w = con.execute("SELECT count(*) FROM '%s/windows.parquet'" % out).fetchone()[0]
h = con.execute("SELECT count(*) FROM '%s/health.parquet'" % out).fetchone()[0]
print(json.dumps({"startup_s": t1 - t0, "job_s": t2 - t1, "windows": w, "health": h}))
"""


TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PSS_EVERY = 10  # samples (of 0.1 s)


def sample_tree(pid: int, cpu_s: dict[int, float], *, pss: bool = True) -> tuple[int, int]:
    """(RSS, PSS) bytes of pid's whole process tree, and each process's CPU seconds so far
    into cpu_s. RSS counts a page once per process that maps it (Spark's forked Python
    workers share most of theirs), PSS splits shared pages between their processes: the
    tree's real footprint. PSS only with `pss` (else 0): its read walks the process's
    whole memory map (16 ms for a warm server's JVM) holding the lock that the process's
    page faults wait for, so sampled ten times a second it slowed the Spark it measured."""
    rss = pss_b = 0
    for p in [pid, *procs.descendants(pid)]:
        try:
            fields = Path("/proc/%d/stat" % p).read_text().rsplit(")", 1)[1].split()
            cpu_s[p] = (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime
        except (OSError, IndexError, ValueError):
            pass
        try:
            if pss:
                for line in Path("/proc/%d/smaps_rollup" % p).read_text().splitlines():
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss_b += int(line.split()[1]) * 1024
            else:
                rss += (procs.status_kb("VmRSS", p) or 0) * 1024
        except OSError:
            pass
    return rss, pss_b


def run_engine(code: str, journal: Path, out: Path, *args: str,
               server: int | None = None) -> dict[str, Any]:
    """Run one engine's job in a process of its own: its result, wall time, CPU seconds
    and peak memory; with `server` (a Connect server's PID), that process tree counts
    too: its CPU seconds during the job, and its memory."""
    out.mkdir(parents=True, exist_ok=True)
    server_cpu0: dict[int, float] = {}
    if server is not None:
        sample_tree(server, server_cpu0)
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code, str(journal), str(out), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = 0
    cpu_s: dict[int, float] = {}  # the last sample of each process: short-lived ones, and
    server_cpu: dict[int, float] = {}  # the last 0.1 s of each, are missed (an undercount)
    for n in itertools.count():
        if p.poll() is not None:
            break
        pss = n % PSS_EVERY == 0  # RSS ten times a second, PSS once a second
        rss, pss_b = sample_tree(p.pid, cpu_s, pss=pss)
        if server is not None:
            srss, spss = sample_tree(server, server_cpu, pss=pss)
            rss, pss_b = rss + srss, pss_b + spss
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss_b)
        time.sleep(0.1)
    wall = time.monotonic() - t0
    if server is not None:
        sample_tree(server, server_cpu)
    stdout, stderr = p.communicate()
    if p.returncode != 0:
        raise SystemExit("engine failed:\n" + stderr[-3000:])
    res: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    cpu = sum(cpu_s.values()) + sum(v - server_cpu0.get(k, 0.0) for k, v in server_cpu.items())
    res.update(wall_s=wall, peak_rss=peak_rss, peak_pss=peak_pss, cpu_s=cpu)
    return res


class Server:
    """`pubmote pipeline serve` (local[*], the pipeline's defaults) on a free port, for
    the warm-server rows; stopped by PID."""

    def __init__(self, log: Path) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = "sc://127.0.0.1:%d" % port
        self.log = log
        with log.open("wb") as f:
            self.p = subprocess.Popen([sys.executable, "-m", "pubmote", "pipeline", "serve",
                                       "--port", str(port)], stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while "listening on " + self.url not in log.read_text(errors="replace"):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("no Spark Connect server:\n" + log.read_text()[-3000:])
            time.sleep(0.1)

    def stop(self) -> None:
        end_process(self.p, grace_s=60)  # SIGTERM, SIGKILL a minute later


def tables_s(r: dict[str, Any]) -> float:
    """A remote run's time from its session to its last table written (its log lines')."""
    marks = {name: t for t, name in r["marks"]}
    return float(marks.get("wrote", r["startup_s"]) - r["startup_s"])


def where_the_time_goes(r: dict[str, Any]) -> str:
    """A warm remote run's phases, from its log lines' times."""
    marks = {name: t for t, name in r["marks"]}
    start = r["startup_s"]
    tables = marks.get("wrote", start)  # the last table written
    spark_report = marks.get("report", tables)
    # (the plots are drawn as the report's queries answer: one phase)
    return ("Python, imports and the session %.2f s, the two tables %.2f s, the report's "
            "Spark queries and plots %.2f s, its page %.2f s"
            % (start, tables - start, spark_report - tables, r["end_s"] - spark_report))


PER_FILE = 100_000
WARM = "Spark Connect, warm server, typed columns"
WARM_UP_RUNS = 3  # of the job on a new server before the warm rows; the last with a report


def make_journal(d: Path, rows: int) -> None:
    """The synthetic journal of `rows` records (20 boards, 2 subscribers, seed 42) in d,
    PER_FILE records a file; kept between runs (build/ is a cache)."""
    from pubmote.pipeline.synth import records, write_journal

    stamp = d / ".rows"
    if stamp.exists() and int(stamp.read_text()) >= rows:
        return
    for f in d.glob("journal-*.jsonl"):
        f.unlink()
    n = 0

    def limited() -> Iterator[dict[str, Any]]:
        nonlocal n
        for r in records(rows, boards=20, subscribers=2, seed=42):
            if n >= rows:
                return
            n += 1
            yield r

    write_journal(d, limited(), per_file=PER_FILE)
    stamp.write_text(str(rows))


def journal_of(rows: int, full: Path) -> Path:
    """A folder with the first `rows` records of the full journal (hard links to its files,
    the first lines of the last one): the synthesiser's stream is the same for any length,
    so these are the smaller journal."""
    d = full.parent / ("rows-%d" % rows)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    for i, f in enumerate(sorted(full.glob("journal-*.jsonl"))[:-(-rows // PER_FILE)]):
        keep = rows - i * PER_FILE
        if keep >= PER_FILE:
            os.link(f, d / f.name)
        else:  # part of a file (one record a line): its first records
            with f.open() as src, (d / f.name).open("w") as dst:
                dst.writelines(itertools.islice(src, keep))
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000],
                    help="journal sizes to run (default: 1M and 10M rows)")
    ap.add_argument("--warm-up-runs", type=int, default=WARM_UP_RUNS, metavar="N",
                    help="runs of the job on the new server before the warm rows, the last "
                         "with a report (default %d; make bench QUICK=1: 1)" % WARM_UP_RUNS)
    args = ap.parse_args()
    full = ROOT / "build" / "bench" / "pipeline" / "journal"
    print("pipeline bench: synthetic journals (bridge format) of %s rows in %s"
          % (" and ".join(format(r, ",") for r in args.rows), full.parent))
    make_journal(full, max(args.rows))
    from pubmote.pipeline.jvm_archive import ensure

    # as after `make setup` or a first batch run: Spark's JVM maps its class archive
    print("Spark's class archive: %s" % (ensure() or "none (PUBMOTE_SPARK_ARCHIVE=off)"))
    print("| rows | MB | engine | wall s | of which startup s | CPU s | rows/s "
          "| peak RSS MB | peak PSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = []
    # the warm-server rows at the smallest size asked for (1M by default): what a report
    # or a batch run costs beside a resident server
    warm_rows = {min(args.rows)}
    warm_report: dict[int, dict[str, Any]] = {}
    warm_up: dict[int, list[dict[str, Any]]] = {}
    for rows in sorted(args.rows):
        journal = journal_of(rows, full)
        mb = sum(f.stat().st_size for f in journal.glob("journal-*.jsonl")) / 1e6
        # First from the journal's JSON lines, as a first batch run over a journal meets
        # it (Spark's run compacts the files into typed columns, DuckDB parses the JSON);
        # then again over the typed columns, as every later run (and a --follow job,
        # which compacts each file as it appears) meets them: both engines read them.
        with tempfile.TemporaryDirectory(prefix="pubmote-bench-") as tmp:
            res = {"Spark local[*], JSON lines (compacts)":
                   run_engine(SPARK_JOB, journal, Path(tmp) / "spark"),
                   "DuckDB, JSON lines":
                   run_engine(DUCKDB_JOB, journal, Path(tmp) / "duckdb", "json"),
                   "Spark local[*], typed columns":
                   run_engine(SPARK_JOB, journal, Path(tmp) / "spark2"),
                   "DuckDB, typed columns":
                   run_engine(DUCKDB_JOB, journal, Path(tmp) / "duckdb2", "columns")}
            if rows in warm_rows:
                # a resident server, warm as one that has served this job before: its
                # first run takes 3-4x a later one (the JIT compiling Spark's code for
                # it), its third about 20 % less than its second. Then the job, and the
                # job with its report (CPU s and memory: the client's and the server's)
                server = Server(Path(tmp) / "serve.log")
                try:
                    warm_up[rows] = [
                        run_engine(REMOTE_JOB, journal, Path(tmp) / ("warm-up-%d" % i),
                                   server.url, *([str(Path(tmp) / "warm-up-report")]
                                                 if i == args.warm_up_runs - 1 else []))
                        for i in range(args.warm_up_runs)]
                    res[WARM] = run_engine(REMOTE_JOB, journal, Path(tmp) / "remote",
                                           server.url, server=server.p.pid)
                    warm_report[rows] = run_engine(
                        REMOTE_JOB, journal, Path(tmp) / "remote-report", server.url,
                        str(Path(tmp) / "report"), server=server.p.pid)
                finally:
                    server.stop()
        sizes = {(r["windows"], r["health"]) for r in res.values()}
        if len(sizes) != 1:
            raise SystemExit("the engines disagree on the table sizes: %r" % res)
        for name, r in res.items():
            print("| %s | %.0f | %s | %.1f | %.1f | %.1f | %s | %.0f | %.0f |" % (
                format(rows, ","), mb, name, r["wall_s"], r["startup_s"], r["cpu_s"],
                format(int(rows / r["wall_s"]), ","), r["peak_rss"] / 1e6,
                r["peak_pss"] / 1e6))
        names = list(res)
        if WARM in res:
            warm, duck, rep = res[WARM], res[names[3]], warm_report[rows]
            summary.append("%s rows, warm Spark Connect server: Spark / DuckDB %.2fx the "
                           "rows/s (typed columns; Spark %.2f s, DuckDB %.2f s end to end; "
                           "the jobs alone, without their processes' start: %.2fx)"
                           % (format(rows, ","), duck["wall_s"] / warm["wall_s"],
                              warm["wall_s"], duck["wall_s"], duck["job_s"] / warm["job_s"]))
            # how far from its first runs a warm server is
            summary.append("%s rows, a new Spark Connect server's runs of the job: the tables "
                           "in %s s, then %.2f s measured (the JIT compiles Spark's code for "
                           "the job's plans as it runs them)"
                           % (format(rows, ","), ", ".join("%.2f" % tables_s(r)
                                                           for r in warm_up[rows]),
                              tables_s(warm)))
            summary.append("%s rows, warm Spark Connect server: the report (tables and "
                           "the HTML page) in %.2f s end to end (%s)"
                           % (format(rows, ","), rep["wall_s"], where_the_time_goes(rep)))
        for what, s, d in (("JSON lines", res[names[0]], res[names[1]]),
                           ("typed columns", res[names[2]], res[names[3]])):
            summary.append("%s rows, %s (%d window rows, %d health rows): Spark / DuckDB "
                           "%.2fx the rows/s (job only, without startup: %.2fx), %.2fx the "
                           "CPU time, %.2fx the peak RSS; Spark peak RSS %.0f MB" % (
                               format(rows, ","), what, s["windows"], s["health"],
                               d["wall_s"] / s["wall_s"], d["job_s"] / s["job_s"],
                               s["cpu_s"] / d["cpu_s"], s["peak_rss"] / d["peak_rss"],
                               s["peak_rss"] / 1e6))
        shutil.rmtree(journal)
    print("%d cores; load average at the end %.1f" % (os.cpu_count() or 0, os.getloadavg()[0]))
    for line in summary:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
