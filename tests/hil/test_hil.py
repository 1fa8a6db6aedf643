"""Hardware-in-the-loop: deploy, boot, publish and subscribe through a bridge, filters,
reconnect after a board reset and after a bridge restart, garbage on the line, and the
board's own memory report. One suite, three targets: the simulated board (the unix port
behind a socat pty, driven by mpremote), the emulated Pico (the real rp2 firmware with
pubmote frozen in, in rp2040js, its UART0 at 115200 baud on a pty: the real-board code path
of frozen firmware, UART link and `machine`), and a real board (--board-port PORT --board
TYPE). Every wait is bounded."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cbor2
import pynng
import pytest

from e2e import free_port
from pubmote.boards.cable import end_process
from pubmote.boards.sim import read_tail

BIN = Path(sys.executable).parent
PUBMOTE = str(BIN / "pubmote")
NAME = "hil1"
PERIOD_MS = 5
MESSAGES_S = 420  # for the messages of the memory check
ENABLE = ("no real board: run `make hil PORT=/dev/ttyUSB0 BOARD=esp32` (or pytest tests/hil "
          "--board-port PORT --board TYPE) with a board on that port")


@dataclass
class Target:
    kind: str
    board: str
    port: str  # the REPL port mpremote uses
    link_port: str  # what the bridge opens
    tmp: Path
    sp_pub: str = field(default_factory=lambda: "tcp://127.0.0.1:%d" % free_port())
    sp_sub: str = field(default_factory=lambda: "tcp://127.0.0.1:%d" % free_port())
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    bridge: subprocess.Popen[bytes] | None = None
    pico: EmulatedPico | None = None

    def start_bridge(self) -> None:
        # a deployed board has its key (deploy's --key-file); the emulated Pico, booted
        # from its own flash image, none
        keys = self.tmp / "keys.json"
        auth = ["--keys", str(keys)] if keys.exists() else ["--allow-anonymous-boards"]
        # the bridge keeps its own copy of the log's descriptor
        with open(self.tmp / "bridge.log", "ab") as log:
            self.bridge = subprocess.Popen(
                [PUBMOTE, "bridge", "--no-view", "--serial", self.link_port, "--sp-pub",
                 self.sp_pub, "--sp-sub", self.sp_sub, *auth],
                stdout=subprocess.DEVNULL, stderr=log)

    def stop_bridge(self, sig: int = signal.SIGINT) -> None:
        end_process(self.bridge, sig, 15)
        self.bridge = None


class EmulatedPico:
    """An emulated Pico (pubmote.boards.emu.PicoBoard) whose pty cable is relayed by an
    event loop in a thread of this process: the test can power-cycle the board and put
    garbage on its line, as with a board on the bench."""

    def __init__(self, tmp: Path) -> None:
        from pubmote.boards import fwbuild
        from pubmote.boards.emu import PicoBoard

        fwbuild.build("pico", progress=lambda line: None)  # cached: a copy when unchanged
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        # its configuration reaches it as a littlefs image in its flash; a power cycle
        # boots from the chip as the board left it (NAME.flash)
        self.board = PicoBoard(NAME, tmp, period_ms=PERIOD_MS)
        self.call(self.board.start)

    def call(self, fn: Callable[..., object], *args: object) -> object:
        async def run() -> object:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def reset(self) -> None:
        self.call(self.board.reset)

    def garbage(self, data: bytes) -> None:
        self.call(self.board.cable.inject, 0, data)  # towards the board
        self.call(self.board.cable.inject, 1, data)  # towards the bridge

    def close(self) -> None:
        self.call(self.board.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module", params=["simulated", "emulated", "real"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("hil")
    port = request.config.getoption("--board-port")
    if request.param == "real":
        if not port:
            pytest.skip(ENABLE)
        board = request.config.getoption("--board")
        t = Target("real", board, port, request.config.getoption("--bridge-port") or port, tmp)
    elif request.param == "emulated":
        pico = EmulatedPico(tmp)
        t = Target("emulated", "pico", "", pico.board.port, tmp, pico=pico)
    else:
        t = Target("simulated", "unix", str(tmp / "repl"), str(tmp / "tty"), tmp)
        sim = subprocess.Popen([PUBMOTE, "simdev", "--dir", str(tmp)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.procs.append(sim)
        deadline = time.monotonic() + 15
        while not (tmp / "repl").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    yield t
    t.stop_bridge()
    for p in t.procs:
        end_process(p, signal.SIGINT, 15)
    if t.pico is not None:
        t.pico.close()


def _deploy(t: Target) -> str:
    p = subprocess.run([PUBMOTE, "deploy", "--board", t.board, "--port", t.port, "--name", NAME,
                        "--set", "period_ms=%d" % PERIOD_MS, "--key-file",
                        str(t.tmp / "keys.json")], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


class Sub:
    def __init__(self, url: str) -> None:
        self.s = pynng.Sub0(recv_timeout=200, recv_buffer_size=8192, reconnect_time_min=20,
                            reconnect_time_max=100)
        self.s.subscribe(b"/pubmote/demo/%s/" % NAME.encode())
        self.s.dial(url, block=False)

    def wait(self, prefix: bytes, timeout_s: float, what: str) -> bytes:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                m = self.s.recv()
            except pynng.Timeout:
                continue
            if m.startswith(prefix):
                return m
        raise AssertionError("no %s within %.0f s (the board stopped answering?)"
                             % (what, timeout_s))

    def close(self) -> None:
        self.s.close()


def _reading(m: bytes) -> dict[str, object]:
    result: dict[str, object] = cbor2.loads(m.split(b"|", 1)[1])
    return result


def _logs(t: Target) -> str:
    """The last lines of the bridge's log and of the board's console: why it went quiet."""
    out = []
    paths = [t.tmp / "bridge.log"]
    if t.pico is not None:
        paths += [t.pico.board.log_path, t.pico.board.emu_log_path]
    for p in paths:
        text = read_tail(p)  # a long run's console: only its end is read
        lines = ["(cannot be read)"] if text is None else text.splitlines()[-25:]
        out.append("--- %s (last %d lines):\n%s" % (p.name, len(lines), "\n".join(lines)))
    return "\n".join(out)


def _command(t: Target, payload: bytes, sub: Sub, reply_prefix: bytes,
             timeout_s: float = 180) -> bytes:
    """Send a command until the board answers. The first may go before the dial, so it is
    sent again, 1 s later, then 2, 4, 8 s: an emulated Pico on a loaded machine takes
    seconds per reply, and a command sent every second would keep it answering them."""
    pub = pynng.Pub0()
    pub.dial(t.sp_sub, block=False)
    try:
        deadline = time.monotonic() + timeout_s
        again_s = 1.0
        while time.monotonic() < deadline:
            pub.send(b"/pubmote/demo/%s/command|%s" % (NAME.encode(), payload))
            try:
                return sub.wait(reply_prefix, again_s, "reply")
            except AssertionError:
                again_s = min(8.0, again_s * 2)
                continue
        raise AssertionError("the board did not answer %r within %.0f s\n%s"
                             % (payload, timeout_s, _logs(t)))
    finally:
        pub.close()


def _stats(t: Target, sub: Sub) -> dict[str, int]:
    reply = _command(t, b"stats", sub, b"/pubmote/demo/%s/stats|" % NAME.encode())
    return {k: v for k, v in _reading(reply).items() if isinstance(v, int)}


def _no_leak(t: Target, sub: Sub, messages: int) -> None:
    """The board's free heap after boot, then after `messages` more readings: no more than
    4 kB lower (1,000 messages; 200 on the emulated Pico, whose acked publishes take
    ~100 ms of its time each, emulated at a fraction of real time; make bench runs its
    1,000)."""
    boot = _stats(t, sub)
    # the readings counted as they arrive, each acked on the board as the bridge relayed
    # it; not by asking the board, whose answers would take the time being measured (a
    # deadline, not a rate check: an emulated Pico on 2 loaded cores has managed one
    # message a second)
    deadline = time.monotonic() + MESSAGES_S
    temperature = b"/pubmote/demo/%s/temperature|" % NAME.encode()
    for n in range(messages):
        left = deadline - time.monotonic()
        assert left > 0, "%d of %d readings in %d s\n%s" % (n, messages, MESSAGES_S, _logs(t))
        sub.wait(temperature, left, "reading %d of %d" % (n + 1, messages))

    # an answer to a command sent before could still come: the stats taken after the
    # readings, each one acked (or failed after its retries) on the board by then
    def settled(st: dict[str, int]) -> int:
        return st["acked"] + st.get("publish_failed", 0)

    later = boot
    while settled(later) < settled(boot) + messages:
        assert time.monotonic() < deadline + 180, "no stats after the readings:\n%s" % _logs(t)
        later = _stats(t, sub)
    # readings still queued in the outbox (a loaded machine slows an emulated board's
    # drain below its period) hold heap that is not a leak: up to 160 B each allowed
    queued = later.get("outbox", 0) - boot.get("outbox", 0)
    more = later["acked"] - boot["acked"]
    print("\nboard memory: mem_free %d B after boot, %d B after %d more messages (%d more "
          "queued in the outbox)" % (boot["mem_free"], later["mem_free"], more, queued))
    assert later["mem_free"] >= boot["mem_free"] - 4096 - 160 * max(0, queued), \
        "the board leaks memory while publishing"
    if t.kind == "emulated":
        print("board heap: mem_alloc %d B after boot, %d B after %d more messages"
              % (boot.get("mem_alloc", 0), later.get("mem_alloc", 0), more))


@pytest.mark.timeout(900)  # a hang guard: the emulated Pico on 2 loaded cores runs slower than real time
def test_hil_suite(target: Target) -> None:
    t = target
    t0 = time.monotonic()

    def phase(what: str) -> None:  # where the time goes, in the -s / -rP output
        print("\n[%s %.1f s] %s" % (t.kind, time.monotonic() - t0, what))
    if t.kind == "simulated":
        # mip installs pubmote from this checkout too (firmware/package.json, relative urls)
        root = Path(__file__).resolve().parents[2]
        p = subprocess.run([str(BIN / "mpremote"), "connect", t.port, "resume", "mip", "install",
                            "--target", "mip-lib", str(root / "firmware" / "package.json")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert (t.tmp / "flash" / "mip-lib" / "pubmote_wire" / "notify.py").is_file()
    if t.kind != "emulated":
        # deploy, and a second deploy copies nothing (the emulated Pico has pubmote frozen
        # in its firmware and its config in the flash image it booted from)
        out = _deploy(t)
        assert "verified" in out
        again = _deploy(t)
        assert "0 copied" in again, again
    # boot: the board publishes through the bridge
    phase("bridge start")
    t.start_bridge()
    sub = Sub(t.sp_pub)
    try:
        first = _reading(sub.wait(b"/pubmote/demo/%s/temperature|" % NAME.encode(), 60,
                                  "reading after boot"))
        assert "celsius" in first
        if t.kind == "emulated":  # its ADC is fed a room's temperature (boards/pico.mjs)
            celsius = first["celsius"]
            assert isinstance(celsius, float) and 15 < celsius < 30, first
        phase("first reading")
        # subscribe: a command reaches the board, which answers on .../ack
        ack = _command(t, b"hello-board", sub, b"/pubmote/demo/%s/ack|hello-board" % NAME.encode())
        assert ack == b"/pubmote/demo/%s/ack|hello-board" % NAME.encode(), ack
        # filters: a topic the board did not subscribe to never crosses its link (the
        # bridge filters; the board counts what it had to drop itself in `filtered`)
        pub = pynng.Pub0()
        pub.dial(t.sp_sub, block=False)
        try:
            for _ in range(20):
                pub.send(b"/pubmote/demo/%s/commandeer|not-for-me" % NAME.encode())
                time.sleep(0.02)
        finally:
            pub.close()
        ack = _command(t, b"after-filter", sub, b"/pubmote/demo/%s/ack|after-filter" % NAME.encode())
        assert ack == b"/pubmote/demo/%s/ack|after-filter" % NAME.encode(), ack
        stats = _reading(_command(t, b"stats", sub, b"/pubmote/demo/%s/stats|" % NAME.encode()))
        assert stats["filtered"] == 0, stats
        # the board's own memory report after boot, then after 1,000 messages (200 emulated)
        messages = 200 if t.kind == "emulated" else 1000
        phase("%d messages" % messages)
        _no_leak(t, sub, messages)
        phase("reset")
        # reset the board: it boots again and publishes from seq 0
        if t.pico is not None:
            t.pico.reset()  # a power cycle: the emulator starts again from its flash
        else:
            reset = [str(BIN / "mpremote"), "connect", t.port]
            reset += ["resume", "soft-reset"] if t.kind == "simulated" else ["reset"]
            if t.kind == "real":
                t.stop_bridge()  # the REPL port may be the link too
            subprocess.run(reset, capture_output=True, timeout=30)
            if t.kind == "real":
                t.start_bridge()
        deadline = time.monotonic() + 60
        while True:
            r = _reading(sub.wait(b"/pubmote/demo/%s/temperature|" % NAME.encode(), 60,
                                  "reading after the reset"))
            if int(r["seq"]) < 100:  # type: ignore[call-overload]
                break
            assert time.monotonic() < deadline, "the board did not come back after a reset"
        if t.pico is not None:
            # garbage on the line, both ways: it costs the frames it hits, nothing more
            bad_before = int(_reading(_command(t, b"stats", sub, b"/pubmote/demo/%s/stats|"
                                               % NAME.encode()))["frames_bad"])  # type: ignore[call-overload]
            t.pico.garbage(bytes((i * 37 + 11) & 0xFF for i in range(300)) + b"\x00")
            ack = _command(t, b"after-garbage", sub,
                           b"/pubmote/demo/%s/ack|after-garbage" % NAME.encode())
            assert ack == b"/pubmote/demo/%s/ack|after-garbage" % NAME.encode(), ack
            stats = _reading(_command(t, b"stats", sub, b"/pubmote/demo/%s/stats|"
                                      % NAME.encode()))
            assert int(stats["frames_bad"]) > bad_before, stats  # type: ignore[call-overload]
        phase("bridge restart")
        # restart the bridge (kill -9): the board re-registers, traffic resumes
        t.stop_bridge(signal.SIGKILL)
        time.sleep(1)
        t.start_bridge()
        sub.wait(b"/pubmote/demo/%s/temperature|" % NAME.encode(), 60,
                 "reading after the bridge restarted")
        ack = _command(t, b"after-restart", sub,
                       b"/pubmote/demo/%s/ack|after-restart" % NAME.encode())
        assert ack == b"/pubmote/demo/%s/ack|after-restart" % NAME.encode(), ack
        phase("done")
    finally:
        sub.close()
        t.stop_bridge()


def test_mip_package_lists_every_module() -> None:
    """firmware/package.json (for `mpremote mip install`) names every module, no more."""
    import json

    root = Path(__file__).resolve().parents[2]
    pkg = json.loads((root / "firmware" / "package.json").read_text())
    listed = sorted(dst for dst, _ in pkg["urls"])
    wanted = sorted(["pubmote_wire/%s" % f.name for f in (root / "shared" / "pubmote_wire").glob("*.py")]
                    + ["pubmote_node/%s" % f.name for f in (root / "firmware" / "pubmote_node").glob("*.py")])
    assert listed == wanted
    for _, src in pkg["urls"]:
        assert (root / "firmware" / src).resolve().is_file(), src
