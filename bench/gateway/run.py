"""Gateway-capacity benchmark: many boards on one bridge, beside mosquitto with the same
number of MQTT QoS 1 clients and pynng's own PUB->SUB, all in the same run.

Virtual boards (bench/gateway/vboards.py: the board firmware's Node under CPython, one TCP
connection each to the bridge's --tcp face, as WiFi boards) publish with one message in
flight each, first as fast as acks come (the aggregate rate), then at a realistic paced
rate per board (latency and CPU per message at that load). A subscriber counts what
arrives: pynng SUB on the bridge's SP PUB endpoint, an MQTT subscriber on mosquitto; an
acked message that never arrives is `lost`. The server's CPU per message comes from
/proc (the bridge's or mosquitto's process alone).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynng

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests" / "host"))
sys.path.insert(0, str(ROOT / "bench" / "bridge"))
from e2e import free_port  # noqa: E402 - the tests' port reservation


def cpu_s(pid: int) -> float:
    f = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100.0  # utime + stime, in clock ticks


def wait_port(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("nothing listening on port %d" % port)


class Counter:
    """Messages received by a subscriber thread; `recv` waits a moment for more and
    returns how many arrived (0 on a timeout)."""

    def __init__(self, recv: Callable[[], int]) -> None:
        self.n = 0
        self.recv = recv
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self.stop:
            self.n += self.recv()

    def settle(self, want: int, timeout_s: float = 20) -> int:
        """Wait until `want` arrived, or nothing more arrives for a second; return n."""
        deadline = time.monotonic() + timeout_s
        last, t_last = self.n, time.monotonic()
        while self.n < want and time.monotonic() < deadline:
            time.sleep(0.05)
            if self.n != last:
                last, t_last = self.n, time.monotonic()
            elif time.monotonic() - t_last > 1.0:
                break
        return self.n


def mqtt_subscriber(port: int) -> Callable[[], int]:
    """An MQTT 3.1.1 subscriber to /bench/# (QoS 0); returns its recv function."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x00\x00\x02sb")
    assert s.recv(4)[0] == 0x20
    topic = b"/bench/#"
    body = b"\x00\x01" + struct.pack(">H", len(topic)) + topic + b"\x00"
    s.sendall(b"\x82" + bytes([len(body)]) + body)
    buf = bytearray()
    while len(buf) < 5:
        buf += s.recv(5 - len(buf))
    assert buf[0] == 0x90  # SUBACK
    del buf[:]
    s.settimeout(0.2)

    def recv() -> int:
        try:
            chunk = s.recv(1 << 16)
        except TimeoutError:
            return 0
        buf.extend(chunk)
        n = p = 0
        while True:  # whole packets: fixed header, remaining length, body
            q, length, shift = p + 1, 0, 0
            while q < len(buf):
                b = buf[q]
                q += 1
                length |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            else:
                break
            if q + length > len(buf):
                break
            n += buf[p] & 0xF0 == 0x30
            p = q + length
        del buf[:p]
        return n

    return recv


def run_boards(kind: str, port: int, n: int, rate: float, seconds: float,
               server_pid: int, counter: Counter,
               spy: list[str] | None = None) -> dict[str, Any]:
    """One phase; `spy`: a py-spy command line that samples the server during it (the
    server's pid and the phase's length are added)."""
    gen = subprocess.Popen([sys.executable, str(HERE / "vboards.py"), kind, "127.0.0.1",
                            str(port), str(n), str(rate), str(seconds)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert gen.stdout is not None and gen.stdin is not None
        line = gen.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError("virtual boards failed: %r" % line)
        time.sleep(0.5)  # keepalive registrations settle before the measured phase
        before = counter.n
        sampler = None
        if spy is not None:
            sampler = subprocess.Popen(spy + ["--pid", str(server_pid), "--duration",
                                              str(max(1, int(seconds)))],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # py-spy attaches
        cpu0 = cpu_s(server_pid)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        r = json.loads(gen.stdout.readline())
        cpu1 = cpu_s(server_pid)
        if sampler is not None:
            sampler.wait(30)
    finally:
        gen.kill()
        gen.wait()
    got = counter.settle(before + r["acked"]) - before
    r.update(rate=r["acked"] / r["seconds"], lost=max(0, r["acked"] - got),
             server_us_per_msg=1e6 * (cpu1 - cpu0) / max(1, r["acked"]),
             boards_us_per_msg=1e6 * r["cpu_s"] / max(1, r["acked"]))
    return r


def bench_pubmote(n: int, paced: float, seconds: float,
                  spy: list[str] | None = None) -> list[dict[str, Any]]:
    tcp, sp = free_port(), free_port()
    url = "tcp://127.0.0.1:%d" % sp
    log = tempfile.TemporaryFile(mode="w+")  # the bridge's log: its summary line at exit
    bridge = subprocess.Popen([str(Path(sys.executable).parent / "pubmote"), "bridge",
                               "--no-view", "--tcp", "127.0.0.1:%d" % tcp, "--sp-pub", url,
                               "--sp-sub", "none"],
                              stdout=subprocess.DEVNULL, stderr=log)
    sub = pynng.Sub0(recv_buffer_size=8192, recv_timeout=200)
    sub.subscribe(b"/bench/")
    sub.dial(url, block=False)

    def recv() -> int:
        try:
            sub.recv()
        except (pynng.Timeout, pynng.Closed):
            return 0
        return 1

    counter = Counter(recv)
    try:
        wait_port(tcp)
        # the SUB dials in the background: a message relayed before it is connected is not
        # for it (nor counted as dropped), so the phases start once it is
        deadline = time.monotonic() + 20
        while not sub.pipes:
            if time.monotonic() > deadline:
                raise RuntimeError("the pynng SUB did not connect to the bridge")
            time.sleep(0.05)
        return [run_boards("pubmote", tcp, n, 0, seconds, bridge.pid, counter, spy),
                run_boards("pubmote", tcp, n, paced, seconds, bridge.pid, counter)]
    finally:
        counter.stop = True
        sub.close()
        bridge.send_signal(2)
        try:
            bridge.wait(15)
        except subprocess.TimeoutExpired:
            bridge.kill()
            bridge.wait()
        log.seek(0)
        summary = [ln for ln in log.read().splitlines() if "summary:" in ln]
        log.close()
        if summary:
            print("  bridge %s" % summary[-1].split("summary: ", 1)[1], file=sys.stderr)


def bench_mosquitto(n: int, paced: float, seconds: float) -> list[dict[str, Any]]:
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(exe).exists():
        sys.exit("mosquitto not installed: run `make setup` (Debian package mosquitto)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pubmote-gw-") as tmp:
        conf = Path(tmp) / "mosquitto.conf"
        conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n"
                        "log_dest none\nmax_queued_messages 100000\n" % port)
        broker = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            counter = Counter(mqtt_subscriber(port))
            try:
                return [run_boards("mqtt", port, n, 0, seconds, broker.pid, counter),
                        run_boards("mqtt", port, n, paced, seconds, broker.pid, counter)]
            finally:
                counter.stop = True
        finally:
            broker.terminate()
            broker.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boards", type=int, default=100,
                    help="virtual boards (default 100; the bridge takes up to 256)")
    ap.add_argument("--rate", type=float, default=5.0,
                    help="paced phase: messages/s per board (default 5)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per phase (default 5)")
    args = ap.parse_args()
    from run import bench_pynng  # bench/bridge/run.py

    pm = bench_pubmote(args.boards, args.rate, args.seconds)
    mq = bench_mosquitto(args.boards, args.rate, args.seconds)
    ng = bench_pynng()
    print("One gateway, %d boards (virtual: the firmware's Node on CPython, one TCP "
          "connection each), one message in flight per board, %.0f s per phase"
          % (args.boards, args.seconds))
    print("  %-34s %-18s %9s %8s %8s %6s %14s %14s" % (
        "server", "load", "acked/s", "p50 ms", "p99 ms", "lost", "server us/msg",
        "boards us/msg"))
    for label, rows in (("pubmote bridge -> pynng SUB", pm),
                        ("mosquitto (QoS 1) -> MQTT SUB", mq)):
        for r, load in zip(rows, ("as fast as acked", "%.0f/s per board" % args.rate),
                           strict=True):
            print("  %-34s %-18s %9.0f %8.2f %8.2f %6d %14.0f %14.0f" % (
                label, load, r["rate"], r["p50"], r["p99"], r["lost"], r["server_us_per_msg"],
                r["boards_us_per_msg"]))
    print("  %-34s %-18s %9.0f %8.3f %8.3f %6d %14s %14s" % (
        "pynng PUB -> SUB (one socket pair)", "as fast as it goes", ng["rate"], ng["p50"],
        ng["p99"], ng["lost"], "-", "-"))
    print("  ratio pubmote/mosquitto, aggregate acked rate: %.2f; server CPU per message: "
          "%.1fx mosquitto's" % (pm[0]["rate"] / mq[0]["rate"],
                                 pm[0]["server_us_per_msg"] / max(1e-9, mq[0]["server_us_per_msg"])))
    lost = sum(r["lost"] for r in pm)
    if lost:
        print("  LOST: %d messages the bridge acked never reached the subscriber" % lost)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
