"""`make harden-report`: the hardening figures in one run. Fuzzing (the last `make fuzz`
stats, FUZZ_STATS; else a short run of FUZZ_SECONDS per target, FUZZ_ONLY's if given),
the regression corpus, then every attack and fault scenario of the adversarial suite
(tests/adversarial/scenarios) at HARDEN_SCALE times the tests' sizes, HARDEN_JOBS at a
time, each in a worker process of its own: per scenario the acknowledged messages lost,
the bridge's memory before the attack, at its peak and after against the bound its
limits imply, and how long the genuine board took to be served again once the attacker
left; the board flood lasts FLOOD_SECONDS. Then the packets rejected by reason. The exit
status is 1 if an acked message was lost, a bound exceeded, a recovery took over 10 s or
a scenario failed."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "host"), str(ROOT / "tests" / "adversarial")]

from measure import FLOOR, RECOVERY_S  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402

import faults  # noqa: E402

AUTH = "auth"  # the signed realm's rejections: a section of its own, not a row


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


def print_fuzzing() -> None:
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


# ---- a worker: runs the scenarios it is given on stdin, one JSON line of figures each --

def _compact(figures: dict[str, Any]) -> dict[str, Any]:
    """Long lists (every seq received...) as their length: the report shows none."""
    return {k: len(v) if isinstance(v, list) and len(v) > 20 else v
            for k, v in figures.items()}


def worker(scale: float, flood_s: float) -> None:
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the scenarios print goes to the log, not into the results
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # floods of sockets
    for line in sys.stdin:
        key = line.strip()
        tmp = Path(tempfile.mkdtemp(prefix="pubmote-harden-%s-" % key))
        t0 = time.monotonic()
        try:
            if key == AUTH:
                figures = asyncio.run(faults.auth_realm(tmp))
            else:
                fn = SCENARIOS[key][1]
                kw = {"seconds": flood_s} if key == "board_flood" else {}
                figures = asyncio.run(fn(tmp, scale, **kw))
        except BaseException as e:  # noqa: BLE001 - the report shows it, the next one runs
            figures = {"error": "%s: %s" % (type(e).__name__, e),
                       "error_trace": traceback.format_exc()[-3000:]}
        figures["seconds"] = round(time.monotonic() - t0, 1)
        shutil.rmtree(tmp, ignore_errors=True)
        results.write(json.dumps(_compact(figures), default=str) + "\n")
        results.flush()


# ---- the report: workers in parallel, then the table -------------------------------

def _timeout_s(key: str, scale: float, flood_s: float) -> float:
    return 300 + 60 * scale + (flood_s if key == "board_flood" else 0)


async def run_all(keys: list[str], jobs: int, scale: float, flood_s: float,
                  logs: Path) -> dict[str, dict[str, Any]]:
    queue = list(keys)
    results: dict[str, dict[str, Any]] = {}

    async def spawn(n: int) -> asyncio.subprocess.Process:
        log = open(logs / ("worker-%d.log" % n), "ab")  # noqa: SIM115 - the worker's
        return await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--worker", str(scale), str(flood_s),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
            limit=16 << 20, cwd=ROOT)

    async def slot(n: int) -> None:
        proc: asyncio.subprocess.Process | None = None
        while queue:
            key = queue.pop(0)
            if proc is None:
                proc = await spawn(n)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(key.encode() + b"\n")
            await proc.stdin.drain()
            limit = _timeout_s(key, scale, flood_s)
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), limit)
            except TimeoutError:
                line = b""
            if not line:  # hung or died: this worker goes, a new one takes the next
                if proc.returncode is None:
                    proc.kill()
                rc = await proc.wait()
                proc = None
                results[key] = {"error": "no figures within %.0f s (worker exit %s)"
                                % (limit, rc)}
            else:
                results[key] = json.loads(line)
            title = SCENARIOS[key][0] if key in SCENARIOS else "board authentication"
            print("  done: %s (%.0f s)" % (title, results[key].get("seconds", limit)),
                  flush=True)
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            await proc.wait()

    await asyncio.gather(*(slot(n) for n in range(jobs)))
    return results


def _kb(v: Any) -> str:
    return "-" if v is None else "%d" % v


def print_table(results: dict[str, dict[str, Any]], flood_s: float) -> dict[str, int]:
    """The rows; returns the failure counts by kind."""
    bad = {"lost": 0, "over_bound": 0, "slow_recovery": 0, "failed": 0}
    print("\n  %-36s %-12s %-6s %9s %9s %9s %9s %-3s %9s" % (
        "scenario", "acked lost", "RSS of", "before", "peak", "after", "bound", "ok",
        "recovered"))
    for key, (scenario, _) in SCENARIOS.items():
        title = scenario
        if key == "board_flood":
            title = "%s (%.0f s)" % (scenario, flood_s)
        r = results[key]
        if "error" in r:
            bad["failed"] += 1
            print("  %-36s FAILED: %s" % (title, r["error"].splitlines()[0][:200]))
            continue
        if "skipped" in r:
            print("  %-36s skipped: %s" % (title, r["skipped"]))
            continue
        lost = r["acked_lost"]
        bad["lost"] += lost or 0
        ok = r.get("within_bound")
        bad["over_bound"] += ok is False
        rec = r["recovery_s"]
        bad["slow_recovery"] += rec is not None and rec > RECOVERY_S
        growth_ok = "-" if ok is None else ("yes" if ok else "NO")
        print("  %-36s %-12s %-6s %9s %9s %9s %9s %-3s %9s" % (
            title, "-" if lost is None else "%d of %d" % (lost, r["acked"]),
            "test" if r["rss_of"].startswith("this") else "bridge", _kb(r["rss_before_kb"]),
            _kb(r["rss_peak_kb"]), _kb(r["rss_after_kb"]),
            "-" if r.get("bound_kb") is None else "+%d" % r["bound_kb"], growth_ok,
            "-" if rec is None else "%.1f s" % rec))
    print("""
  acked lost: of the messages a board saw acked (probe boards log each), how many never
    reached the subscriber ("-": no board publishes in that scenario).
  RSS, kB: of the process that runs the bridge: "test", the scenario's own process (the
    bridge in it, with the genuine board's SP clients and the attackers' sockets; the
    simulated boards run apart), "bridge", the `pubmote bridge` process (after the stop:
    its last size before it exited). before: once the genuine board was served, before
    the attack; peak: the highest since (VmHWM); after: once the attacker left.
  bound: the growth (peak - before) the limits imply at the scenario's settings, from
    docs/limits.md's figures, plus a floor of %d MiB for the measurement; ok: the peak
    stayed within it.
  recovered: from the attacker leaving (the fault ending) to the genuine board served
    again: a new reading and a command's echo (the journal: the relay's longest pause;
    a kill -9: from the restart; a power cut: from the power coming back). None where
    the bridge stopped, or where the fault never ends (the slow subscriber, the flood:
    the other subscriber and the calm board are served throughout). Within %.0f s
    required.""" % (
        FLOOR >> 20, RECOVERY_S))
    print("\n  what each bound is made of:")
    for key, (title, _) in SCENARIOS.items():
        if results[key].get("bound"):
            print("    %s: %s" % (title, results[key]["bound"]))
    flood = results["board_flood"]
    if "error" not in flood:
        print("\n  flood from one board: %s msg/s; the other board lost %s of %s acked, %s "
              "fetch failures" % (flood["flood_msgs_per_s"], flood["acked_lost"],
                                  flood["acked"], flood["calm_failed"]))
    for key, (title, _) in SCENARIOS.items():
        if "error_trace" in results[key]:
            print("\n  %s failed:\n%s" % (title, results[key]["error_trace"]))
    return bad


def main() -> int:
    flood_s = float(os.environ.get("FLOOD_SECONDS", "600"))
    scale = float(os.environ.get("HARDEN_SCALE", "10"))
    jobs = max(1, int(os.environ.get("HARDEN_JOBS", "2")))
    print("pubmote hardening report")
    print_fuzzing()
    print("\nAttacks and faults (HARDEN_SCALE=%g: the adversarial tests' sizes times %g; "
          "%d at a time):" % (scale, scale, jobs), flush=True)
    # the longest first: the flood, then the stops and journal faults
    keys = ["board_flood", *[k for k in SCENARIOS if k != "board_flood"], AUTH]
    with tempfile.TemporaryDirectory(prefix="pubmote-harden-") as logs:
        results = asyncio.run(run_all(keys, jobs, scale, flood_s, Path(logs)))
    bad = print_table(results, flood_s)
    print("\nAcknowledged messages lost, all scenarios: %d (must be 0)" % bad["lost"])
    print("Memory bounds exceeded: %d (must be 0)" % bad["over_bound"])
    print("Recoveries over %.0f s: %d (must be 0)" % (RECOVERY_S, bad["slow_recovery"]))
    print("Scenarios failed: %d (must be 0)" % bad["failed"])
    auth = results[AUTH]
    print("\nPackets rejected, by reason:")
    if "error" in auth:
        bad["failed"] += 1
        print("  FAILED: %s" % auth["error"])
    for reason, n in auth.get("rejected", {}).items():
        print("  %-20s %d" % (reason, n))
    return 0 if not any(bad.values()) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(float(sys.argv[2]), float(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
