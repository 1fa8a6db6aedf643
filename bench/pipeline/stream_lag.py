"""Streaming lag: how long after a journal file is renamed into place (the bridge closing
it) its windows are in the `--follow` job's tables. A `pubmote pipeline --follow` process
(local[2], --trigger-seconds 0.5, 10-second windows, 1-second watermark) is fed FILES
synthetic files one at a time, each one window of 4 boards' messages plus a record just
past the watermark that closes the window; the lag is from the file's rename to the first
Parquet file in the sink holding that window. Prints p50 and p99.

    python bench/pipeline/stream_lag.py [--files 20]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WINDOW_MS = 10_000
T0_MS = 1_789_999_980_000  # on a window boundary


def window_file(journal: Path, k: int) -> None:
    """Journal file k: window k's messages, then a record 1 s past its end (the
    watermark) so that the window closes in the batch that reads this file."""
    from pubmote.pipeline.synth import records, write_journal

    t0 = T0_MS + k * WINDOW_MS
    recs: list[dict[str, Any]] = [r for r in records(40, boards=4, seed=k, t0_ms=t0)
                                  if r["outcome"] != "board_up"]
    recs.append({"t_bridge": float(t0 + WINDOW_MS + 1001), "topic": "/tick",
                 "origin": "tick", "ingress": "bench", "outcome": "fetch_failed"})
    write_journal(journal, iter(recs), start_index=k)


def windows_in(sink: Path, seen: set[Path], found: set[int]) -> None:
    """Add the window starts (ms) of sink files not read yet to found."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    for f in sink.glob("part-*.parquet"):
        if f in seen:
            continue
        try:
            col = pq.read_table(f, columns=["window_start"]).column(0).to_pylist()
        except (OSError, pa.ArrowInvalid):  # still being written: read it on the next look
            continue
        seen.add(f)
        found.update(int(t.timestamp() * 1000) for t in col)


def percentile(xs: list[float], p: float) -> float:
    v = sorted(xs)
    return v[min(len(v) - 1, max(0, int(p * len(v) + 0.5) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20)
    args = ap.parse_args()
    pubmote = str(Path(sys.executable).parent / "pubmote")
    with tempfile.TemporaryDirectory(prefix="pubmote-lag-") as tmp:
        journal, out, log = Path(tmp) / "j", Path(tmp) / "out", Path(tmp) / "job.log"
        journal.mkdir()
        with log.open("wb") as f:
            job = subprocess.Popen(
                [pubmote, "pipeline", str(journal), "--out", str(out), "--follow",
                 "--trigger-seconds", "0.5", "--window", "10 seconds", "--watermark",
                 "1 second", "--master", "local[2]"], stdout=f, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while "following" not in log.read_text():
                if job.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the --follow job did not start:\n" + log.read_text())
                time.sleep(0.1)
            lags: list[float] = []
            seen: set[Path] = set()
            found: set[int] = set()
            for k in range(args.files):
                window_file(journal, k)
                closed = time.monotonic()
                want = T0_MS + k * WINDOW_MS
                deadline = closed + 120
                while want not in found:
                    if job.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("window %d never came:\n%s" % (k, log.read_text()))
                    time.sleep(0.02)
                    windows_in(out / "windows", seen, found)
                lags.append(time.monotonic() - closed)
        finally:
            job.send_signal(signal.SIGINT)
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()
    # the first files also pay the job's warm-up (first Python workers, code generation)
    steady = lags[2:] if len(lags) > 4 else lags
    print("streaming lag, journal file renamed -> its window in the windows table "
          "(local[2], trigger 0.5 s, %d files%s): "
          "p50 %.2f s, p99 %.2f s, max %.2f s; first file %.2f s"
          % (len(steady), ", the first 2 left out as warm-up" if len(lags) > 4 else "",
             percentile(steady, 0.5), percentile(steady, 0.99), max(steady), lags[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
