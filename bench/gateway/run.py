"""Gateway-capacity benchmark: many boards on one bridge, beside mosquitto with the same
number of MQTT QoS 1 clients and pynng's own PUB->SUB, all in the same run.

Virtual boards (vboards.py, one TCP connection each to the bridge's --tcp face, as WiFi
boards) publish with one message in flight each, first as fast as acks come (the
aggregate rate), then at a realistic paced rate per board (latency and CPU per message at
that load). The pubmote boards are light clients written with the shared codec
(lightboard.py), as the MQTT ones are minimal QoS 1 clients; a row with the firmware's own
Node on CPython follows. A subscriber counts what arrives, both the same way (a raw
socket, whole messages counted in Python): an SP SUB on the bridge's PUB endpoint, an MQTT
SUB on mosquitto; an acked message that never arrives is `lost`. The server's CPU per
message comes from /proc (the bridge's or mosquitto's process alone); the generator's and
the subscriber's are shown too, as all share the machine's cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pubmote.boards.cable import end_process
from pubmote_wire import sp

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests" / "host"))
sys.path.insert(0, str(ROOT / "bench" / "bridge"))
sys.path.insert(0, str(ROOT / "bench"))
from mosquitto import mosquitto, wait_port  # noqa: E402

from e2e import free_port  # noqa: E402 - the tests' port reservation


def cpu_s(pid: int) -> float:
    f = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100.0  # utime + stime, in clock ticks


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
    return _counter(s, buf, _mqtt_publishes)


def _mqtt_publishes(buf: bytearray) -> tuple[int, int]:
    """The PUBLISHes among buf's whole MQTT packets, and the bytes those packets take."""
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
    return n, p


def sp_subscriber(url: str) -> Callable[[], int]:
    """A raw SP SUB on the bridge's PUB endpoint, counting messages on /bench/ the way
    mqtt_subscriber counts MQTT PUBLISHes (a socket, a Python loop over whole messages);
    returns its recv function. (pynng's SUB costs its process ~10 us per message, the
    MQTT counter ~2: on a 2-core machine the subscriber's CPU is taken from the servers.)"""
    host, port = url[len("tcp://"):].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(sp.header(sp.SUB))
    head = b""
    while len(head) < 8:
        head += s.recv(8 - len(head))
    sp.check_header(head, sp.PUB)
    return _counter(s, bytearray(), _sp_bench_messages)


def _sp_bench_messages(buf: bytearray) -> tuple[int, int]:
    """The /bench/ messages among buf's whole SP messages, and the bytes those take."""
    n = p = 0
    while p + 8 <= len(buf):  # whole messages: u64 length, body
        length = int.from_bytes(buf[p:p + 8], "big")
        if p + 8 + length > len(buf):
            break
        n += buf.startswith(b"/bench/", p + 8)  # the SUB's filter, as nanomsg's
        p += 8 + length
    return n, p


def _counter(s: socket.socket, buf: bytearray,
             whole: Callable[[bytearray], tuple[int, int]]) -> Callable[[], int]:
    """A subscriber's recv function: what the socket has within 0.2 s added to buf, the
    wanted messages among its whole ones counted (`whole`) and those bytes dropped."""
    s.settimeout(0.2)

    def recv() -> int:
        try:
            chunk = s.recv(1 << 16)
        except TimeoutError:
            return 0
        buf.extend(chunk)
        n, p = whole(buf)
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
            sampler = subprocess.Popen([*spy, "--pid", str(server_pid), "--duration",
                                        str(max(1, int(seconds)))],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # py-spy attaches
        cpu0, sub0 = cpu_s(server_pid), time.process_time()
        gen.stdin.write("go\n")
        gen.stdin.flush()
        line = gen.stdout.readline()
        cpu1, sub1 = cpu_s(server_pid), time.process_time()
        if sampler is not None:
            sampler.wait(30)
    finally:
        gen.kill()
        gen.wait()
    r: dict[str, Any] = json.loads(line)
    got = counter.settle(before + r["acked"]) - before
    r.update(rate=r["acked"] / r["seconds"], lost=max(0, r["acked"] - got),
             server_us_per_msg=1e6 * (cpu1 - cpu0) / max(1, r["acked"]),
             boards_us_per_msg=1e6 * r["cpu_s"] / max(1, r["acked"]),
             sub_us_per_msg=1e6 * (sub1 - sub0) / max(1, r["acked"]))
    return r


class Server:
    """A server under test, its subscriber connected: where boards dial, its pid (for
    its CPU), the subscriber's counter."""

    def __init__(self, port: int, pid: int, counter: Counter) -> None:
        self.port, self.pid, self.counter = port, pid, counter

    def phase(self, kind: str, n: int, rate: float, seconds: float,
              spy: list[str] | None = None) -> dict[str, Any]:
        return run_boards(kind, self.port, n, rate, seconds, self.pid, self.counter, spy)


@contextlib.contextmanager
def bridge_server() -> Iterator[Server]:
    """A pubmote bridge with a --tcp face for the boards and an SP PUB endpoint, its SUB
    connected; at the end its summary line (SP writes, bridge-added latency) on stderr."""
    tcp, sp_port = free_port(), free_port()
    url = "tcp://127.0.0.1:%d" % sp_port
    # the bridge's log: its summary line at exit, read and closed in the finally below
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
    bridge = subprocess.Popen([str(Path(sys.executable).parent / "pubmote"), "bridge",
                               "--no-view", "--tcp", "127.0.0.1:%d" % tcp, "--sp-pub", url,
                               # the virtual boards have no key
                               "--sp-sub", "none", "--allow-anonymous-boards"],
                              stdout=subprocess.DEVNULL, stderr=log)
    counter: Counter | None = None
    try:
        wait_port(tcp)
        wait_port(sp_port)
        # connected before the phases: a message relayed before a SUB is connected is not
        # for it (nor counted as dropped)
        counter = Counter(sp_subscriber(url))
        yield Server(tcp, bridge.pid, counter)
    finally:
        if counter is not None:
            counter.stop = True
        end_process(bridge, signal.SIGINT, grace_s=15)
        log.seek(0)
        summary = [ln for ln in log.read().splitlines() if "summary:" in ln]
        log.close()
        if summary:
            print("  bridge %s" % summary[-1].split("summary: ", 1)[1], file=sys.stderr)


@contextlib.contextmanager
def mosquitto_server() -> Iterator[Server]:
    with mosquitto("max_queued_messages 100000\n") as (port, broker):
        counter: Counter | None = None
        try:
            counter = Counter(mqtt_subscriber(port))
            yield Server(port, broker.pid, counter)
        finally:
            if counter is not None:
                counter.stop = True


def bench_pubmote(n: int, paced: float, seconds: float, spy: list[str] | None = None,
                  kind: str = "light") -> list[dict[str, Any]]:
    """The bridge's two phases (as fast as acked, sampled by `spy` if given; paced) with
    `kind` virtual boards (light: lightboard.py; pubmote: the firmware's Node)."""
    with bridge_server() as server:
        return [server.phase(kind, n, 0, seconds, spy), server.phase(kind, n, paced, seconds)]


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boards", type=int, default=100,
                    help="virtual boards (default 100; the bridge takes up to 256)")
    ap.add_argument("--rate", type=float, default=5.0,
                    help="paced phase: messages/s per board (default 5)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per phase (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="as-fast-as-acked phases per server, taking turns (default 3)")
    args = ap.parse_args()
    from run import bench_pynng  # bench/bridge/run.py

    load0 = os.getloadavg()[0]
    # the servers take turns, round after round (the machine is shared: its load moves
    # within a run); each round's ratio is of two phases seconds apart
    light: list[dict[str, Any]] = []
    mq: list[dict[str, Any]] = []
    with bridge_server() as bridge, mosquitto_server() as broker:
        for _ in range(args.rounds):
            light.append(bridge.phase("light", args.boards, 0, args.seconds))
            mq.append(broker.phase("mqtt", args.boards, 0, args.seconds))
        light_paced = bridge.phase("light", args.boards, args.rate, args.seconds)
        mq_paced = broker.phase("mqtt", args.boards, args.rate, args.seconds)
        node = bridge.phase("pubmote", args.boards, 0, args.seconds)
    ratios = [a["rate"] / b["rate"] for a, b in zip(light, mq, strict=True)]
    ng = bench_pynng()
    print("One gateway, %d virtual boards, one TCP connection and one message in flight each "
          "(same topics and payloads for both servers), %g s per phase, load average "
          "%.1f -> %.1f" % (args.boards, args.seconds, load0, os.getloadavg()[0]))
    print("  pubmote boards: light = the board protocol's least publisher in the shared codec "
          "(lightboard.py), as the MQTT clients are MQTT's least QoS 1 publisher; Node = the "
          "firmware itself on CPython (its own CPU bounds the generator). The subscribers: "
          "a raw SP SUB and a raw MQTT SUB, each a socket counting whole messages in Python")
    print("  %-40s %-16s %9s %8s %8s %6s %9s %9s %9s" % (
        "server", "load", "acked/s", "p50 ms", "p99 ms", "lost", "server", "boards",
        "sub"))
    print("  %-40s %-16s %9s %8s %8s %6s %9s %9s %9s" % ("", "", "", "", "", "", "us/msg",
                                                        "us/msg", "us/msg"))
    rows = [("pubmote bridge, light boards -> SP SUB", "as fast, round %d" % (i + 1), r)
            for i, r in enumerate(light)]
    rows.append(("pubmote bridge, light boards -> SP SUB", "%.0f/s per board" % args.rate,
                 light_paced))
    rows.append(("pubmote bridge, Node boards -> SP SUB", "as fast as acked", node))
    rows += [("mosquitto (QoS 1) -> MQTT SUB", "as fast, round %d" % (i + 1), r)
             for i, r in enumerate(mq)]
    rows.append(("mosquitto (QoS 1) -> MQTT SUB", "%.0f/s per board" % args.rate, mq_paced))
    for label, load, r in rows:
        print("  %-40s %-16s %9.0f %8.2f %8.2f %6d %9.0f %9.0f %9.0f" % (
            label, load, r["rate"], r["p50"], r["p99"], r["lost"], r["server_us_per_msg"],
            r["boards_us_per_msg"], r["sub_us_per_msg"]))
    print("  %-40s %-16s %9.0f %8.3f %8.3f %6d %9s %9s %9s" % (
        "pynng PUB -> SUB (one socket pair)", "as fast as it goes", ng["rate"], ng["p50"],
        ng["p99"], ng["lost"], "-", "-", "-"))
    cpu = median([r["server_us_per_msg"] for r in light])
    print("  ratio pubmote/mosquitto, aggregate zero-loss acked rate: median %.2f over %d "
          "rounds (%s); Node boards %.2f of mosquitto's median; bridge CPU per relayed "
          "message %.0f us (median) = %.1fx mosquitto's" % (
              median(ratios), len(ratios), ", ".join("%.2f" % x for x in ratios),
              node["rate"] / median([r["rate"] for r in mq]), cpu,
              cpu / max(1e-9, median([r["server_us_per_msg"] for r in mq]))))
    lost = sum(r["lost"] for r in [*light, light_paced, node])
    if lost:
        print("  LOST: %d messages the bridge acked never reached the subscriber" % lost)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
