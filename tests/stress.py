"""Run the CPython suite several times in a row under load, in a new random order each time,
and say which tests failed in which run (make test-stress RUNS=5 HOG=2).

A flaky test fails here long before it fails in CI: the CPU hog keeps every core busy
(one spinning process per core, started and ended by this script), and the shuffled order
shows tests that depend on what ran before. Each run's order has a seed, printed, so a
failure can be replayed: pytest -p random_order --random-order-bucket=global
--random-order-seed=SEED.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)
SUMMARY = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed)\b.*?) in [\d.]+s", re.M)


def start_hog(n: int) -> list[subprocess.Popen[bytes]]:
    """n processes that spin on a core each until ended."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_hog(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="how many runs (default 3)")
    ap.add_argument("--hog", type=int, default=os.cpu_count() or 2,
                    help="spinning processes beside the suite (default: one per core; 0: none)")
    ap.add_argument("--workers", default="5", help="pytest-xdist workers (default 5)")
    ap.add_argument("--seed", type=int, help="first run's order seed (default: random)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    failures: dict[str, list[int]] = {}
    bad_runs = 0
    for run in range(1, args.runs + 1):
        cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-n", args.workers,
               "--dist", "load",
               "-p", "random_order", "--random-order-bucket=global",
               "--random-order-seed=%d" % (seed + run), *args.pytest_args]
        print("run %d/%d: order seed %d, %d hog process(es)" % (run, args.runs, seed + run,
                                                               args.hog), flush=True)
        hog = start_hog(args.hog)
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        finally:
            stop_hog(hog)
        out = p.stdout + p.stderr
        summary = SUMMARY.findall(out)
        print("  %s, %.0f s, exit %d" % (summary[-1] if summary else "no summary",
                                         time.monotonic() - t0, p.returncode), flush=True)
        for test in FAILED.findall(out):
            failures.setdefault(test, []).append(run)
            print("  failed: " + test)
        if p.returncode != 0:
            bad_runs += 1
            log = ROOT / "build" / ("stress-run-%d.log" % run)
            log.parent.mkdir(exist_ok=True)
            log.write_text(out)
            print("  output: %s" % log.relative_to(ROOT))
    print("%d of %d runs failed" % (bad_runs, args.runs))
    for test, runs in sorted(failures.items()):
        print("  %s: runs %s" % (test, ", ".join(map(str, runs))))
    return 1 if bad_runs else 0


if __name__ == "__main__":
    sys.exit(main())
