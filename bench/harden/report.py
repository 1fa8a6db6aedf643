"""`make harden-report`: the hardening figures in one run. Fuzzing (the last `make fuzz`
stats, FUZZ_STATS; else a short run of FUZZ_SECONDS per target, FUZZ_ONLY's if given), the
regression corpus, faults injected per kind with the acknowledged messages lost (must be
0), packets rejected by reason, and the bridge's memory at the start and end of a flood
(FLOOD_SECONDS, default 600: ten minutes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "host"))

import faults  # noqa: E402


def fuzz_figures() -> dict[str, dict[str, int]]:
    stats = ROOT / os.environ.get("FUZZ_STATS", "build/fuzz/stats.json")
    if not stats.exists():
        seconds = os.environ.get("FUZZ_SECONDS", "10")
        only = os.environ.get("FUZZ_ONLY", "")
        print("(no %s from `make fuzz`: fuzzing %s s per target now)" % (stats, seconds),
              flush=True)
        subprocess.run([sys.executable, str(ROOT / "tests" / "fuzz" / "run.py"), "--seconds",
                        seconds, "--stats", str(stats)] + (["--only", only] if only else []),
                       cwd=ROOT, check=False)
    if not stats.exists():
        return {}
    result: dict[str, dict[str, int]] = json.loads(stats.read_text())
    return result


def main() -> int:
    flood_s = float(os.environ.get("FLOOD_SECONDS", "600"))
    print("pubmote hardening report")
    fz = fuzz_figures()
    corpus = ROOT / "tests" / "vectors" / "corpus"
    crashes = sorted(p for p in corpus.rglob("crash-*"))
    inputs = sorted(p for p in corpus.rglob("*") if p.is_file())
    print("\nFuzzing (atheris, CPython):")
    for target, st in sorted(fz.items()):
        print("  %-24s %12d inputs  %d crashes" % (target, st.get("execs", 0),
                                                     st.get("crashes", 0)))
    print("  total inputs fuzzed: %d" % sum(st.get("execs", 0) for st in fz.values()))
    print("  crashes found and fixed (kept as regression inputs): %d" % len(crashes))
    print("  regression corpus replayed by `make test` on CPython and both MicroPythons: "
          "%d inputs" % len(inputs))

    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="pubmote-harden-") as tmp:
        t = Path(tmp)
        for sub in ("noise", "reset", "restart", "slow", "flood", "auth"):
            (t / sub).mkdir()
        for name, coro in (
                ("noisy serial line", faults.noisy_line(t / "noise")),
                ("power cut mid-publish", faults.resets_mid_publish(t / "reset")),
                ("bridge kill -9 + restart", faults.bridge_killed_and_restarted(t / "restart")),
                ("slow SP subscriber", faults.slow_subscriber(t / "slow")),
                ("flood from one board (%.0f s)" % flood_s,
                 faults.flood_from_one_board(t / "flood", seconds=flood_s)),
                ("board authentication", faults.auth_realm(t / "auth"))):
            print("  running: %s" % name, flush=True)
            results[name] = asyncio.run(coro)  # type: ignore[arg-type]
    print("\nFaults injected, by kind:")
    noise = results["noisy serial line"]
    print("  bit errors on a serial line: %s bits flipped, %s bytes dropped (%s bad frames "
          "counted by the bridge)" % (noise["bits_flipped"], noise["bytes_lost"],
                                      noise["bad_frames_at_bridge"]))
    print("  power cuts mid-publish: %s" % results["power cut mid-publish"]["resets"])
    print("  bridge kill -9 and restart: %s" % results["bridge kill -9 + restart"]["kills"])
    slow = results["slow SP subscriber"]
    print("  slow SP subscriber: %s messages dropped for it (counted), %s delivered to the "
          "other with %s gaps" % (slow["dropped_for_slow"], slow["delivered_to_fast"],
                                  slow["fast_gaps"]))
    flood = results["flood from one board (%.0f s)" % flood_s]
    print("  flood from one board: %s msg/s; the other board lost %s of %s acked, %s fetch "
          "failures" % (flood["flood_msgs_per_s"], flood["calm_lost"], flood["calm_acked"],
                        flood["calm_failed"]))
    lost = sum(int(r.get("acked_lost", 0)) for r in results.values())  # type: ignore[call-overload]
    lost += int(flood["calm_lost"])  # type: ignore[call-overload]
    print("\nAcknowledged messages lost, all scenarios: %d (must be 0)" % lost)
    rej = results["board authentication"]["rejected"]
    print("\nPackets rejected, by reason:")
    for reason, n in rej.items():  # type: ignore[attr-defined]
        print("  %-20s %d" % (reason, n))
    print("\nBridge memory (RSS of the bridge's process) during the %.0f s flood: %s kB at "
          "start, %s kB at end" % (flood_s, flood["rss_start_kb"], flood["rss_end_kb"]))
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
