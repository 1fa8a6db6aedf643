"""Firmware on the emulated Pico (make bench): the real rp2 firmware with pubmote frozen in,
in rp2040js, its UART0 at 115200 baud on a pty to a real bridge. Heap (gc.mem_alloc() after
gc.collect()) after Node(), after 1,000 acked publishes and 1,000 received messages, and
growth over the last 500 of each; acked publishes per second and round-trip time, timed on
the board's clock, beside the line's physical limit. Goals: <= 20 kB after Node(), <= 24 kB
after the messages and no growth (stretch: 16 kB). Received figures come twice: "handling
it", the moment the app has the message (its ack, a keepalive or a bridge retry may be in
flight), and "handled", once two readings 200 ms apart agree with nothing in flight (no
Interest awaiting its Data, no publish awaiting its ack); the published rows come as they
are at the 500th and the 1,000th publish, and settled the same way after the last.

Then the demo app (pubmote_node.demo, what `pubmote sim` and a deployed board run) on a
board of its own, booted from the same firmware: its reading each second through the
outbox, and 200 commands (--quick: 20) sent one at a time, each echoed back on .../ack;
the bench app beside it only prints the live heap twice a second. "demo app, steady state":
the median (min, max) of the 10 readings (5 s) after the last echo, readings still flowing;
the goal is the same <= 24 kB.

The probe's stages import what a board running pubmote_node.node loads: the wire modules the
node imports (not lp, loaded on a board's first Nack; not sp's SP-TCP codec, only its
SubFilter; not hmac256, loaded only with a key), then the node; no demo app (a board runs one
app). The bench app is frozen into its own build of the firmware beside pubmote
(`pubmote firmware build --app`, as a user freezes theirs), so its code is in flash too.

    python bench/firmware/pico.py [--no-batch] [--durable] [--quick]

--no-batch: the board publishes NDN notifies (docs/protocols/link-batch.md), to compare the
heap the link batches take; --durable: the board's config sets "outbox_dir" (the durable
outbox, loaded at Node(); such a board also keeps the port's filesystem mount, with
littlefs's 1 kB caches: pubmote_node/flashfs.py), to compare the heap it takes (in both
runs; the probe's rows stay those of a board without it); --quick: 20
messages each way instead of 1,000, every row still printed (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pynng

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "host"))
from e2e import free_port  # noqa: E402
from pubmote.boards import fwbuild  # noqa: E402
from pubmote.boards.cable import end_process  # noqa: E402
from pubmote.boards.emu import UART_BAUD, PicoBoard, make_fs_image, runner_cmd  # noqa: E402

NAME = "pico1"
APP = ROOT / "bench" / "firmware" / "pico_app" / "pico_bench.py"
N = 1000  # messages each way (the bench app's own default too)
QUICK_N = 20  # a multiple of 20: the board reports every 10th message received
STALL_S = 60
DEMO_COMMANDS = 200  # commands to the demo app, one at a time (--quick: QUICK_N)
DEMO_SKIP = 2  # samples after the last command's echo (its round trip may still end)
DEMO_SAMPLES = 20  # the steady state: 10 s of the demo's heap, twice a second
GOAL_NODE, GOAL_STEADY, STRETCH = 20 * 1024, 24 * 1024, 16 * 1024


class Board:
    """PicoBoard with its cable relayed by an event loop in a thread."""

    def __init__(self, tmp: Path, extra: dict[str, object] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        # the bench app frozen into the firmware beside pubmote, as a user freezes theirs
        fw = fwbuild.build("pico", apps=[APP], progress=lambda line: None)
        self.board = PicoBoard(NAME, tmp, app="pico_bench", firmware=fw / "firmware.bin",
                               extra=extra)
        self.call(self.board.start)

    def call(self, fn: Callable[..., object], *args: object) -> object:
        async def run() -> object:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def results(self) -> dict[str, int]:
        text = self.board.log_path.read_text(errors="replace") \
            if self.board.log_path.exists() else ""
        return {k: int(v) for k, v in re.findall(r"^BENCH (\S+) (-?\d+)", text, re.M)}

    def close(self) -> None:
        self.call(self.board.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)


# Node() on its own, as a board with a frozen app has it: the probe's few lines are the only
# code in RAM (the bench app below is frozen into its firmware, as a user's app would be).
# Its filesystem is remounted first as boot.run remounts a board's without a durable outbox
# (pubmote_node/flashfs.py: littlefs's small caches), so "booted" is what such a board has.
# The wire stage imports what pubmote_node.node loads (lp loads on a board's first Nack, sp's
# SP-TCP codec never: only its SubFilter); no demo app: a board runs one app, and the demo
# is an app like the bench's
# Each wire module is imported on its own (in dependency order) for the per-module rows.
WIRE = ("errors", "compat", "tlv", "namewire", "signature", "interest_core", "data_core",
        "notify_core", "name", "cbor", "framing", "subfilter")
PROBE = b"""import gc
from pubmote_node import flashfs, forget
flashfs.remount()
forget("pubmote_node.flashfs")
del flashfs, forget
gc.collect()
print("BENCH heap.boot %d" % gc.mem_alloc())
import asyncio
gc.collect()
print("BENCH heap.asyncio %d" % gc.mem_alloc())
for m in WIRE:
    __import__("pubmote_wire." + m)
    gc.collect()
    print("BENCH heap.wire.%s %d" % (m, gc.mem_alloc()))
del m
from pubmote_node.node import Node
gc.collect()
print("BENCH heap.imports %d" % gc.mem_alloc())
node = Node({"name": "pico1", "link": "uart", "uart": 0, "tx": 0, "rx": 1, "baud": 115200})
gc.collect()
print("BENCH heap.node_only %d" % gc.mem_alloc())
print("PROBE" + "-DONE")
""".replace(b"WIRE", repr(WIRE).encode())


def probe() -> dict[str, int]:
    with tempfile.TemporaryDirectory(prefix="pubmote-pico-probe-") as tmp:
        fs = make_fs_image({"/main.py": PROBE}, Path(tmp) / "probe.lfs")
        usb = Path(tmp) / "usb.log"
        subprocess.run(runner_cmd(fs, usb_log=usb, fast=True, exit_on="PROBE-DONE",
                                  timeout_s=120), stdin=subprocess.DEVNULL, timeout=180)
        text = usb.read_text(errors="replace") if usb.exists() else ""
    return {k: int(v) for k, v in re.findall(r"^BENCH (\S+) (-?\d+)", text, re.M)}


def start_bridge(board: Board, sp_pub: str, sp_sub: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "pubmote"), "bridge", "--no-view", "--serial",
         board.board.port, "--sp-pub", sp_pub, "--sp-sub", sp_sub,
         "--allow-anonymous-boards"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def demo_samples(board: Board) -> list[tuple[int, int, int]]:
    # the demo run's (live heap, commands received, readings acked), twice a second
    path = board.board.log_path
    text = path.read_text(errors="replace") if path.exists() else ""
    return [(int(h), int(r), int(a))
            for h, r, a in re.findall(r"^DEMO (\d+) (\d+) (\d+)", text, re.M)]


class DemoLost(Exception):
    """The demo board died or the demo run outlasted its deadline."""


class DemoLine:
    """The bench's SP sockets to the demo board's topics: commands out, everything it
    publishes in (its readings counted)."""

    def __init__(self, board: Board, sp_pub: str, sp_sub: str, deadline: float) -> None:
        self.board = board
        self.base = b"/pubmote/demo/%s/" % NAME.encode()
        self.deadline = deadline
        self.readings = 0
        self.sub = pynng.Sub0(recv_timeout=200, recv_buffer_size=4096)
        self.sub.subscribe(self.base)
        self.sub.dial(sp_pub, block=False)
        self.pub = pynng.Pub0()
        self.pub.dial(sp_sub, block=False)

    def recv(self) -> bytes:
        """What the board published next (b"" after 200 ms of nothing); DemoLost past the
        deadline or once the board is gone."""
        if time.monotonic() > self.deadline or not self.board.board.alive():
            raise DemoLost
        try:
            m: bytes = self.sub.recv()
        except pynng.Timeout:
            return b""
        if m.startswith(self.base + b"temperature|"):
            self.readings += 1
        return m

    def command(self, cmd: bytes) -> None:
        """Send cmd and wait for its echo (sent again after 5 s without it: a loaded machine)."""
        sent_t = 0.0
        while True:
            if time.monotonic() - sent_t > 5:
                self.pub.send(self.base + b"command|" + cmd)
                sent_t = time.monotonic()
            if self.recv() == self.base + b"ack|" + cmd:
                return

    def close(self) -> None:
        self.sub.close()
        self.pub.close()


def demo_run(extra: dict[str, object], commands: int) -> dict[str, int]:
    """The demo app (pubmote_node.demo, as `pubmote sim` and a deployed board run it) on its
    own board: its readings each second through the outbox, and `commands` commands sent to
    it one at a time, each echoed back; its live heap twice a second. Steady state: the
    DEMO_SAMPLES readings after it has echoed the last command (readings still flowing)."""
    sp_pub = "tcp://127.0.0.1:%d" % free_port()
    sp_sub = "tcp://127.0.0.1:%d" % free_port()
    out: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="pubmote-pico-demo-") as tmp:
        board = Board(Path(tmp), dict(extra, bench_demo=1))
        bridge = start_bridge(board, sp_pub, sp_sub)
        line = DemoLine(board, sp_pub, sp_sub, time.monotonic() + 600)
        try:
            # registered, readings flowing: the heap before any command
            while len([a for _, _, a in demo_samples(board) if a >= 1]) < 3:
                line.recv()
            out["readings_only"] = demo_samples(board)[-1][0]
            for i in range(commands):
                line.command(b"cmd%d" % i)
            got: list[int] = []
            while len(got) < DEMO_SKIP + DEMO_SAMPLES:
                line.recv()
                got = [h for h, r, _ in demo_samples(board) if r >= commands]
            steady = got[DEMO_SKIP:]
            out.update(steady_min=min(steady), steady_max=max(steady),
                       steady_median=sorted(steady)[len(steady) // 2],
                       readings=line.readings, commands=commands)
        except DemoLost:
            pass
        finally:
            line.close()
            end_process(bridge, signal.SIGINT, 15)
            board.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-batch", action="store_true", help="NDN notifies, no link batches")
    ap.add_argument("--durable", action="store_true",
                    help="the durable outbox on (config outbox_dir /outbox)")
    ap.add_argument("--quick", action="store_true",
                    help="%d messages each way instead of %d" % (QUICK_N, N))
    args = ap.parse_args()
    n = QUICK_N if args.quick else N
    extra: dict[str, object] = {"bench_n": n}
    if args.no_batch:
        extra["batch"] = False
    if args.durable:
        extra["outbox_dir"] = "/outbox"
    fwbuild.build("pico", progress=lambda line: None)
    node_only = probe()
    sp_pub = "tcp://127.0.0.1:%d" % free_port()
    sp_sub = "tcp://127.0.0.1:%d" % free_port()
    with tempfile.TemporaryDirectory(prefix="pubmote-pico-bench-") as tmp:
        board = Board(Path(tmp), extra)
        bridge = start_bridge(board, sp_pub, sp_sub)
        sub = pynng.Sub0(recv_timeout=200, recv_buffer_size=4096)
        sub.subscribe(b"/pubmote/bench/%s/" % NAME.encode())
        sub.dial(sp_pub, block=False)
        pub = pynng.Pub0()
        pub.dial(sp_sub, block=False)
        t0 = time.monotonic()
        sent = reported = 0
        progress_t = time.monotonic()
        wire: dict[str, int] = {}
        try:
            deadline = time.monotonic() + (600 if args.quick else 1800)
            while "done" not in board.results():
                if time.monotonic() > deadline or not board.board.alive():
                    print("emulated Pico bench: no result (board log %s)" % board.board.log_path)
                    return 1
                try:
                    m = sub.recv()
                except pynng.Timeout:
                    # nothing for a minute while receiving: a message was lost on the way
                    # (a full queue drops, and counts it); send the window again. Not
                    # sooner: the board settles (up to 8 s of its clock, several times that
                    # on a loaded machine) before it reports, and a window sent again meanwhile
                    # only fills its queue with copies
                    if wire and time.monotonic() - progress_t > STALL_S and sent < n + 100:
                        sent = max(reported, sent - 10)
                        progress_t = time.monotonic()
                    else:
                        continue
                else:
                    if not m.startswith(b"/pubmote/bench/%s/ready|" % NAME.encode()):
                        continue
                    reported = int(m.split(b"|", 1)[1])
                    progress_t = time.monotonic()
                    if reported == 0:  # the publishing phase is over: its bytes on the wire
                        wire = dict(board.board.cable.counters)
                while sent < reported + 10:  # a window of 10 beyond what the board has
                    pub.send(b"/pubmote/bench/%s/in|%d" % (NAME.encode(), sent))
                    sent += 1
            wall_s = time.monotonic() - t0
            r = board.results()
        finally:
            sub.close()
            pub.close()
            end_process(bridge, signal.SIGINT, 15)
            board.close()
    r.update(node_only)
    demo = demo_run({k: v for k, v in extra.items() if k != "bench_n"},
                    QUICK_N if args.quick else DEMO_COMMANDS)
    report(r, dict(wire), wall_s, n)
    report_demo(demo)
    return 0


def report_demo(d: dict[str, int]) -> None:
    if "steady_min" not in d:
        print("  demo app: no result")
        return
    print("  the demo app (pubmote_node.demo: a reading a second through its outbox, each "
          "command echoed), live heap twice a second:")
    print("    %-36s %8s B" % ("demo app, readings only", d.get("readings_only", "?")))
    print("    %-36s %8s B   (min %s B, max %s B over %d samples; %s commands echoed, %s "
          "readings)" % ("demo app, steady state", d["steady_median"], d["steady_min"],
                          d["steady_max"], DEMO_SAMPLES, d["commands"], d["readings"]))


def report(r: dict[str, int], wire: dict[str, int], wall_s: float, n: int) -> None:
    print("Firmware on the emulated Pico (rp2 port, pubmote frozen, rp2040js; UART0 at %d baud)"
          % UART_BAUD)
    print("  heap (gc.mem_alloc after gc.collect), goal <= %d B after Node(), <= %d B after "
          "the messages, no growth; stretch %d B" % (GOAL_NODE, GOAL_STEADY, STRETCH))
    print("  (the probe: Node() alone, as with a frozen app, importing only what the node "
          "loads; the bench app is frozen into its firmware beside pubmote)")
    half, full = format(n // 2, ","), format(n, ",")
    rows = [("booted (probe)", "heap.boot"), ("asyncio imported (probe)", "heap.asyncio")]
    rows += [("  + pubmote_wire.%s" % m, "heap.wire." + m) for m in WIRE]
    rows += [("pubmote_node.node imported (probe)", "heap.imports"),
             ("after Node() (probe)", "heap.node_only"),
             ("bench app: after Node()", "heap.after_node"),
             ("link up, registered", "heap.connected"),
             ("after %s published" % half, "heap.pub_half"),
             ("after %s published" % full, "heap.after_pub"),
             ("  and settled", "heap.after_pub_settled"),
             ("%s received, handling it" % half, "heap.recv_half_busy"),
             ("%s received, handled" % half, "heap.recv_half"),
             ("%s received, handling it" % full, "heap.after_recv_busy"),
             ("%s received, handled" % full, "heap.after_recv"),
             ("  and 5 s later, handled", "heap.after_recv_late")]
    last = 0
    for label, key in rows:
        v = r.get(key)
        step = "(%+d)" % (v - last) if v is not None and last else ""
        print("    %-36s %8s B %9s" % (label, "?" if v is None else v, step))
        if v is not None:
            last = v
    if "heap.after_recv" in r:
        print("    growth, last %s published: %+d B; last %s received: %+d B (handled), "
              "%+d B (handling)" % (half, r["heap.after_pub"] - r["heap.pub_half"], half,
                                    r["heap.after_recv"] - r["heap.recv_half"],
                                    r["heap.after_recv_busy"] - r["heap.recv_half_busy"]))
    msgs = r.get("pub.acked", 0)
    pub_ms = r.get("pub.ms", 0)
    if msgs and pub_ms:
        # the UART is full duplex: the busier direction bounds the rate. Bytes per message
        # while publishing (registration and keepalives included: they share the line)
        up = wire["to_bridge"] / msgs
        down = wire["to_board"] / msgs
        limit = UART_BAUD / (10 * max(up, down))
        rate = 1000.0 * msgs / pub_ms
        print("  acked publishes over the UART (board's clock): %.1f/s, round trip %.1f ms avg, "
              "%.1f ms max" % (rate, r["pub.rtt_us_avg"] / 1000, r["pub.rtt_us_max"] / 1000))
        print("  line limit: %.0f B up / %.0f B down per acked publish on the wire, "
              "%d baud -> %.0f msgs/s; rate / limit = %.2f"
              % (up, down, UART_BAUD, limit, rate / limit))
        print("  the node's packet buffers at the end: scratch %s B (made per packet), frame "
              "decoder %s B (they start small and grow to a 1 kB packet's size at the first "
              "packet that needs it)"
              % (r.get("buf.tx", "?"), r.get("buf.rx_frame", "?")))
        print("  received: %s of %d (queue drops %s; at the end %s left queued, %s Interests "
              "pending; Nacks from the bridge %s); wall time %.0f s"
              % (r.get("recv.count", "?"), n, r.get("node.sub_dropped", "?"),
                 r.get("recv.queued", "?"), r.get("recv.pending", "?"),
                 r.get("node.nacks", "?"), wall_s))


if __name__ == "__main__":
    sys.exit(main())
