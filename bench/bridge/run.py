"""Bridge benchmark: simulated boards publish through the bridge to a pynng SUB on
loopback as fast as the bridge acks; sustained messages/s with loss counted, and the
latency from the board's publish call to the subscriber (p50/p99). Beside it, in the same
run, pynng's own PUB->SUB on loopback (messages/s at zero loss, latency). --quick: the
same rows over a second and a few thousand messages (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pynng

from pubmote.boards.cable import end_process

ROOT = Path(__file__).resolve().parents[2]
BOARDS = 2
SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def bench_bridge(seconds: float = SECONDS) -> dict[str, float]:
    url = "tcp://127.0.0.1:%d" % free_port()
    exe = str(Path(sys.executable).parent / "pubmote")
    got: dict[bytes, list[int]] = {}
    lat: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pubmote-bench-") as tmp:
        sub = pynng.Sub0(recv_buffer_size=8192, recv_timeout=200)
        bridge = subprocess.Popen(
            [exe, "bridge", "--no-view", "--sim-boards", str(BOARDS), "--sim-dir", tmp,
             "--sim-app", "bench_pub", "--sim-app-dir", str(ROOT / "bench" / "bridge"),
             "--sp-pub", url, "--sp-sub", "none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            sub.subscribe(b"/bench/")
            sub.dial(url, block=False)
            # warm up: wait for the first message of every board
            deadline = time.monotonic() + 30
            while len(got) < BOARDS and time.monotonic() < deadline:
                try:
                    m = sub.recv()
                except pynng.Timeout:
                    continue
                got.setdefault(m.split(b"|", 1)[0], [])
            got = {k: [] for k in got}
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                try:
                    m = sub.recv()
                except pynng.Timeout:
                    continue
                now = time.time_ns()
                topic, _, body = m.partition(b"|")
                seq, sent = body.split()
                got.setdefault(topic, []).append(int(seq))
                lat.append((now - int(sent)) / 1e6)
            elapsed = time.monotonic() - t0
        finally:
            sub.close()
            end_process(bridge, signal.SIGINT, grace_s=15)
    total = sum(len(v) for v in got.values())
    lost = 0
    for seqs in got.values():
        if seqs:
            lost += (max(seqs) - min(seqs) + 1) - len(set(seqs))
    return {"rate": total / elapsed, "lost": lost, "total": total,
            "p50": pct(lat, 50), "p99": pct(lat, 99)}


def bench_pynng(count: int = 50000, size: int = 60) -> dict[str, float]:
    url = "tcp://127.0.0.1:%d" % free_port()
    pub = pynng.Pub0(listen=url, send_buffer_size=8192)
    sub = pynng.Sub0(dial=url, recv_buffer_size=8192, recv_timeout=2000)
    sub.subscribe(b"")
    time.sleep(0.3)
    pad = b"x" * max(0, size - 30)
    lat: list[float] = []
    received = 0
    t0 = time.monotonic()
    batch = 64  # paced in batches: nng PUB drops when its queue is full
    for i in range(0, count, batch):
        for j in range(i, min(count, i + batch)):
            pub.send(b"%d %d " % (j, time.time_ns()) + pad)
        for _ in range(min(count, i + batch) - i):
            try:
                m = sub.recv()
            except pynng.Timeout:
                break
            received += 1
            lat.append((time.time_ns() - int(m.split()[1])) / 1e6)
    elapsed = time.monotonic() - t0
    pub.close()
    sub.close()
    return {"rate": received / elapsed, "lost": count - received, "total": received,
            "p50": pct(lat, 50), "p99": pct(lat, 99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="1 s of the bridge, 2,000 pynng messages: every line, rough figures")
    quick = ap.parse_args().quick
    b = bench_bridge(1.0 if quick else SECONDS)
    n = bench_pynng(2000 if quick else 50000)
    print("Bridge relay on loopback (same run): %d simulated boards -> bridge -> pynng SUB"
          % BOARDS)
    print("  %-34s %10s %8s %8s %10s %10s" % ("path", "msgs/s", "msgs", "lost", "p50 ms",
                                              "p99 ms"))
    print("  %-34s %10.0f %8d %8d %10.2f %10.2f" % ("boards -> bridge -> SP SUB", b["rate"],
                                                    b["total"], b["lost"], b["p50"], b["p99"]))
    print("  %-34s %10.0f %8d %8d %10.3f %10.3f" % ("pynng PUB -> SUB (baseline)", n["rate"],
                                                    n["total"], n["lost"], n["p50"], n["p99"]))
    print("  ratio bridge/pynng: %.4f (throughput); latency p50 %.0fx pynng's" % (
        b["rate"] / n["rate"], b["p50"] / n["p50"] if n["p50"] else float("nan")))
    print("  (bridge latency = board's publish call -> subscriber: notify, fetch, Data over")
    print("   the boards' ptys, then SP; pynng's = send -> recv on one socket pair)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
