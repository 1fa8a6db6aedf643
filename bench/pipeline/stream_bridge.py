"""The streaming job beside the bridge at full relay rate: a `pubmote bridge --journal`
relaying one board that publishes as fast as it acks (fullrate_board.py, over the
bridge's --tcp face), and `pubmote pipeline --follow` (local[2], its default trigger,
window and watermark) following that journal, for SECONDS (default 600). Prints the
relay rate, the job's lag per journal file (from the bridge putting the file in place to
the commit of the batch that read it, from the job's checkpoint: pipeline/lag.py) as
p50/p99/max after the first WARMUP seconds, the job's resident memory (the driver and its
JVM) at the half-way mark and at the end, its growth over the last half, and what the job
had not read when the board stopped. A job that cannot keep up shows it as a lag that
grows and files left unread.

    python bench/pipeline/stream_bridge.py [--seconds 600] [--lanes 16] [--job-log FILE]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pubmote import procs
from pubmote.boards.cable import end_process
from pubmote.pipeline.lag import LagMeter, committed_lags, percentile
from pubmote.pipeline.stream import BEHIND_S

HERE = Path(__file__).resolve().parent
WARMUP_S = 30.0  # the JVM's first batches (code generation) are not the steady state
DRAIN_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (MB), from /proc."""
    return sum(procs.status_kb("VmRSS", p) or 0 for p in [pid, *procs.descendants(pid)]) / 1024


def wait_for(pred: Callable[[], bool], timeout_s: float, what: str,
             log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for %s%s" % (
                what, ":\n" + log.read_text(errors="replace")[-3000:] if log else ""))
        time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--lanes", type=int, default=16, help="publishes in flight")
    ap.add_argument("--job-log", metavar="FILE", help="keep the job's log there")
    args = ap.parse_args()
    exe = str(Path(sys.executable).parent / "pubmote")
    warmup = min(WARMUP_S, args.seconds / 4)
    with tempfile.TemporaryDirectory(prefix="pubmote-streambridge-") as tmp:
        journal, out = Path(tmp) / "journal", Path(tmp) / "out"
        job_log, bridge_log = Path(tmp) / "job.log", Path(tmp) / "bridge.log"
        tcp = free_port()
        with job_log.open("wb") as f:
            job = subprocess.Popen([exe, "pipeline", str(journal), "--out", str(out),
                                    "--follow", "--master", "local[2]"],
                                   stdout=f, stderr=subprocess.STDOUT)
        with bridge_log.open("wb") as f:
            bridge = subprocess.Popen(
                [exe, "bridge", "--no-view", "--tcp", "127.0.0.1:%d" % tcp, "--sp-pub", "none",
                 "--sp-sub", "none", "--allow-anonymous-boards", "--journal", str(journal)],
                stdout=f, stderr=subprocess.STDOUT)
        board: subprocess.Popen[bytes] | None = None
        acked: list[tuple[float, int]] = []
        rss: list[tuple[float, float, float]] = []  # (s, the job's tree, its driver alone)
        try:
            wait_for(lambda: "following" in job_log.read_text(errors="replace"), 300,
                     "the --follow job", job_log)

            def listening() -> bool:
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", tcp)) == 0

            wait_for(listening, 60, "the bridge", bridge_log)
            board = subprocess.Popen([sys.executable, str(HERE / "fullrate_board.py"),
                                      "127.0.0.1", str(tcp), str(args.lanes)],
                                     stdout=subprocess.PIPE)
            assert board.stdout is not None
            if board.stdout.readline().strip() != b"READY":
                raise SystemExit("the board did not register")

            def read_acks() -> None:
                assert board is not None and board.stdout is not None
                for line in board.stdout:
                    parts = line.decode(errors="replace").split()
                    if parts and parts[0] == "ACKED":
                        acked.append((float(parts[3]), int(parts[1])))

            reader = threading.Thread(target=read_acks, daemon=True)
            reader.start()
            t0 = time.time()
            while time.time() - t0 < args.seconds:
                for name, proc, log in (("job", job, job_log), ("bridge", bridge, bridge_log)):
                    if proc.poll() is not None:
                        raise SystemExit("the %s died:\n%s"
                                         % (name, log.read_text(errors="replace")[-3000:]))
                rss.append((time.time() - t0, tree_rss_mb(job.pid),
                            (procs.status_kb("VmRSS", job.pid) or 0) / 1024))
                time.sleep(1.0)
            end_process(board, signal.SIGINT, grace_s=10)
            reader.join(timeout=10)
            t_end = time.time()
            unread, oldest_ms = LagMeter(journal, out / "_checkpoint" / "windows").waiting(
                t_end * 1000)
            # the bridge puts its last file in place as it stops; the job may read the
            # files left (their lags count too) for at most DRAIN_S
            end_process(bridge, signal.SIGINT, grace_s=15)
            deadline = time.monotonic() + DRAIN_S
            while (LagMeter(journal, out / "_checkpoint" / "windows").waiting(
                    time.time() * 1000)[0] and time.monotonic() < deadline):
                time.sleep(1.0)
            drained = time.time() - t_end
        finally:
            if board is not None and board.poll() is None:
                end_process(board, signal.SIGINT, grace_s=10)
            end_process(bridge, signal.SIGINT, grace_s=15)
            end_process(job, signal.SIGINT, grace_s=60)
        # steady state: the files put in place after the warm-up
        lags = [(t, lag) for t, lag in committed_lags(out / "_checkpoint" / "windows")
                if (t - lag) / 1000 - t0 >= warmup]
        files = len(list(journal.glob("journal-*.jsonl")))
        # what the job said at its stop (each table's lag), after its last "behind:" line
        said = job_log.read_text(errors="replace").splitlines()
        behind = [line for line in said if "behind:" in line]
        summary = behind[-1:] + [line for line in said
                                 if "lag over" in line or "no journal file read" in line]
        if args.job_log:
            shutil.copyfile(job_log, args.job_log)
    in_run = [a for a in acked if a[0] <= t_end]
    rate = ((in_run[-1][1] - in_run[0][1]) / (in_run[-1][0] - in_run[0][0])
            if len(in_run) > 1 else 0.0)
    half = args.seconds / 2
    at_half = next((r for r in rss if r[0] >= half), rss[-1] if rss else (0.0, 0.0, 0.0))
    at_end = rss[-1] if rss else (0.0, 0.0, 0.0)
    rss_max = max((r[1] for r in rss if r[0] >= half), default=0.0)
    lag_s = [lag / 1000 for _, lag in lags]
    print("streaming beside the bridge at full relay rate (one board, %d in flight, %.0f s; "
          "--follow on local[2], trigger 5 s): %.0f messages/s relayed, %d journal files"
          % (args.lanes, args.seconds, rate, files))
    if lag_s:
        print("  job lag, journal file in place -> its batch committed (after %.0f s of "
              "warm-up, %d files): p50 %.1f s, p99 %.1f s, max %.1f s"
              % (warmup, len(lag_s), percentile(lag_s, 0.5), percentile(lag_s, 0.99),
                 max(lag_s)))
    else:
        print("  job lag: no batch committed after the warm-up: the job did not keep up")
    print("  job RSS (driver + JVM): %.0f MB at %.0f s, %.0f MB at the end (max %.0f); "
          "growth over the last half %+.0f MB (the Python driver's %+.0f MB)"
          % (at_half[1], half, at_end[1], rss_max, at_end[1] - at_half[1],
             at_end[2] - at_half[2]))
    p99 = percentile(lag_s, 0.99) if lag_s else float("inf")
    verdict = ("kept up" if oldest_ms <= BEHIND_S * 1000 and p99 <= BEHIND_S
               else "NOT KEEPING UP (lag p99 or a file's wait over %.0f s)" % BEHIND_S)
    print("  %s: %d journal files unread when the board stopped, the oldest put in place "
          "%.1f s before" % (verdict, unread, oldest_ms / 1000))
    print("  after the board stopped, the job read what was left in %.0f s" % drained)
    for line in summary:
        print("  job: " + line.split("pipeline: ", 1)[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
