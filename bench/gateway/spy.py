"""Where the bridge's time goes under the gateway bench: its as-fast-as-acked phase (N
virtual boards, one message in flight each) with the bridge sampled by py-spy (attached
for the phase only). Prints the rate, the bridge's CPU per message (from /proc, incl.
py-spy's sampling cost) and its hottest functions, own time and with callees, as shares of
the samples. Not part of make bench: `python bench/gateway/spy.py [--boards N]`."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as gateway  # noqa: E402 - the bench's own phases


def _board_link_profile() -> object:
    # bench/board_link/profile.py by its path: its name is the stdlib's, and its folder
    # has a run.py of its own
    spec = importlib.util.spec_from_file_location("board_link_profile",
                                                  HERE.parent / "board_link" / "profile.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--boards", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--idle", action="store_true", help="count idle samples (select) too")
    ap.add_argument("--wall", action="store_true",
                    help="every sample, not only those holding the GIL: a send that wakes "
                    "the subscriber gets charged the time the bridge then waits to run again")
    ap.add_argument("--native", action="store_true",
                    help="C frames too (where a syscall's time goes inside the kernel call)")
    args = ap.parse_args()
    prof: Any = _board_link_profile()
    spy = prof.py_spy()
    with tempfile.TemporaryDirectory(prefix="pubmote-gwprof-") as tmp:
        out = Path(tmp) / "bridge.txt"
        # --native pauses the bridge at each sample (py-spy cannot unwind C frames without)
        cmd = [spy, "record", "--format", "raw", "--rate", "500", "-o", str(out)] + (
            [] if args.native else ["--nonblocking"]) + (["--idle"] if args.idle else []) + (
                   ["--native"] if args.native else [])
        r = gateway.bench_pubmote(args.boards, 5.0, args.seconds, spy=cmd)[0]
        raw = out.read_text() if out.exists() else ""
    print("%d boards, as fast as acked: %.0f acked/s, p50 %.2f ms, p99 %.2f ms, lost %d; "
          "bridge %.1f us CPU/msg, boards %.1f us/msg"
          % (args.boards, r["rate"], r["p50"], r["p99"], r["lost"], r["server_us_per_msg"],
             r["boards_us_per_msg"]))
    prof.report(raw, args.top, "in the phase")
    return 0


if __name__ == "__main__":
    sys.exit(main())
