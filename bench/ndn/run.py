"""NDN face benchmark: python-ndn consumers through the bridge's NFD-compatible face,
app -> bridge -> simulated board -> app and app -> bridge -> app (round trips/s, same run),
beside python-ndn's own encode+parse rate of the same packets in this process. --quick:
the same rows from 1 s of each (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pubmote.boards.cable import end_process

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SECONDS = "5"
WINDOW = "8"


def python_ndn_codec_rate(seconds: float = 1.0) -> float:
    from ndn.encoding import (
        InterestParam,
        MetaInfo,
        Name,
        make_data,
        make_interest,
        parse_data,
        parse_interest,
    )
    from ndn.security import DigestSha256Signer

    name = Name.from_str("/test/sim1/data/12345")
    signer = DigestSha256Signer()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        parse_interest(make_interest(name, InterestParam(must_be_fresh=True, lifetime=2000)))
        parse_data(make_data(name, MetaInfo(freshness_period=0), b"x" * 100, signer=signer))
        n += 1
    return n / (time.perf_counter() - t0)


def consume(env: dict[str, str], prefix: str, seconds: str) -> tuple[float, int, float]:
    p = subprocess.run([sys.executable, str(HERE / "consumer.py"), prefix, seconds, WINDOW],
                       env=env, capture_output=True, text=True, timeout=120)
    m = re.search(r"^RESULT (\S+) (\S+) (\S+)$", p.stdout, re.M)
    if not m:
        raise RuntimeError("consumer failed: %s" % (p.stdout + p.stderr)[-500:])
    return float(m.group(1)), int(m.group(2)), float(m.group(3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1 s per path instead of %s" % SECONDS)
    seconds = "1" if ap.parse_args().quick else SECONDS
    exe = str(Path(sys.executable).parent / "pubmote")
    with tempfile.TemporaryDirectory(prefix="pubmote-ndnbench-") as tmp:
        sock = Path(tmp) / "nfd.sock"
        env = dict(os.environ, HOME=tmp, NDN_CLIENT_TRANSPORT="unix://%s" % sock)
        bridge = subprocess.Popen(
            [exe, "bridge", "--no-view", "--sim-boards", "1", "--sim-dir", tmp, "--sim-app",
             "probe_app", "--sim-app-dir", str(ROOT / "tests" / "host" / "board_apps"),
             "--ndn-face", "unix://%s" % sock, "--sp-pub", "none", "--sp-sub", "none"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        producer = None
        try:
            deadline = time.monotonic() + 20
            while not sock.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2)  # the board registers its served prefix
            producer = subprocess.Popen([sys.executable, str(HERE / "producer.py"), "/bench/app"],
                                        env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            time.sleep(1.5)
            board = consume(env, "/test/sim1/data", seconds)
            apps = consume(env, "/bench/app", seconds)
        finally:
            for p in (producer, bridge):
                end_process(p, signal.SIGINT, grace_s=10)
    ref = python_ndn_codec_rate(float(seconds))
    print("NDN face (python-ndn consumer, %s in flight, %s s each, same run):" % (WINDOW, seconds))
    print("  %-38s %12s %8s %10s" % ("path", "round trips/s", "failed", "p50 ms"))
    print("  %-38s %12.0f %8d %10.2f" % ("app -> bridge -> board -> app", *board))
    print("  %-38s %12.0f %8d %10.2f" % ("app -> bridge -> app", *apps))
    print("  %-38s %12.0f" % ("python-ndn encode+parse, Interest+Data", ref))
    print("  ratios to python-ndn's own codec rate: board %.3f, app %.3f"
          % (board[0] / ref, apps[0] / ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
