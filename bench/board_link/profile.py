"""Where one acked publish's time goes: the bench's pubmote row with the bridge under
py-spy (sampling, so the bridge runs at nearly full speed) and the board running
prof_app.py (ticks_us timers around each codec, framing and link step of the node).

Prints the bridge's hottest functions (own time and with callees, as a share of the
bridge's samples) and the board's steps in microseconds per message. Not part of make
bench (py-spy is a dev tool): `python bench/board_link/profile.py [--lanes N]`."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as board_link  # the bench's own rows


def top(raw: str, n: int) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """(samples, hottest by own time, hottest with callees) from py-spy's raw stacks."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        total += k
        frames = [re.sub(r" \((?:.*/)?([^/]+\.py):\d+\)", r" (\1)", f)
                  for f in stack.split(";")]
        own[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    return total, own.most_common(n), incl.most_common(n)


def py_spy() -> str:
    """The py-spy beside this Python (the venv's), else on PATH; exits if there is none."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy not found: make setup installs it (a dev dependency)")
    return spy


def report(raw: str, n: int, where: str) -> None:
    """Print py-spy's collapsed stacks as the n functions with the most samples, by own
    time and with callees."""
    total, own, incl = top(raw, n)
    print("bridge (py-spy, %d samples %s):" % (total, where))
    for title, rows in (("own time", own), ("with callees", incl)):
        print("  %s:" % title)
        for f, k in rows:
            print("    %5.1f %%  %s" % (100 * k / max(1, total), f))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--lanes", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-steps", action="store_true",
                    help="no timers on the board (its CPU per message without their cost)")
    ap.add_argument("--no-spy", action="store_true", help="the bridge without py-spy")
    ap.add_argument("--notify", action="store_true",
                    help="NDN notifies per message (link batches off), the baseline")
    args = ap.parse_args()
    spy = py_spy()
    with tempfile.TemporaryDirectory(prefix="pubmote-prof-") as tmp:
        out = Path(tmp) / "bridge.txt"
        logs: list[str] = []
        r = board_link.bench_pubmote(
            args.seconds, args.lanes, app="prof_app", log_out=logs,
            app_extra={"steps": not args.no_steps, **({"batch": False} if args.notify else {})},
            wrap=None if args.no_spy else [spy, "record", "--format", "raw", "--rate", "500",
                                           "--nonblocking", "-o", str(out), "--"])
        raw = out.read_text() if out.exists() else ""
    per_msg = 1e6 / r["rate"]
    print("pubmote, %d in flight: %.0f acked/s (%.0f us per message), p50 %.2f ms, p99 %.2f ms"
          % (args.lanes, r["rate"], per_msg, r["p50"], r["p99"]))
    msgs = max(1, r["acked"])
    cpu = re.search(r"^CPU board_ms=(\d+) bridge_ms=(\d+)", logs[0] if logs else "", re.M)
    if cpu:
        print("CPU per acked message (from /proc, whole processes): board %.1f us, bridge "
              "%.1f us (the bridge's includes py-spy's sampling cost)"
              % (int(cpu.group(1)) * 1000 / max(1, r["acked"]),
                 int(cpu.group(2)) * 1000 / max(1, r["acked"])))
    print("board (ticks_us around each step; us per acked message, calls per message):")
    for k, us, calls in re.findall(r"^PROF (\S+) (\d+) (\d+)$", logs[0] if logs else "", re.M):
        print("  %-28s %8.1f us %6.2f calls" % (k, int(us) / msgs, int(calls) / msgs))
    report(raw, args.top, "over the whole run incl. start-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
