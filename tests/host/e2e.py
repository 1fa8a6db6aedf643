"""Helpers for the end-to-end tests: free loopback ports, a bridge with simulated boards
in this process, SP clients (pynng, nanocat) with bounded waits."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import cbor2
import pynng

from pubmote.boards.fleet import SimFleet
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config

APPS = Path(__file__).resolve().parent / "board_apps"


# Test ports come from below the kernel's ephemeral range (32768-60999 on Linux), which
# bind(0) and outgoing connections never use, and each is held by an flock on its own lock
# file until the process exits (the kernel drops the lock even on kill -9): no two tests,
# xdist workers or concurrent test runs get the same port, even before its user binds it.
PORT_RANGE = (20000, 32000)
PORT_LOCKS = Path(tempfile.gettempdir()) / "pubmote-test-ports"
_held: list[int] = []  # the lock files' descriptors, open for the life of the process


def _claim(port: int) -> bool:
    try:
        fd = os.open(PORT_LOCKS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    except OSError:
        return False  # another user's lock file
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _held.append(fd)  # held even if the bind below fails: we never try that port again
    with socket.socket() as s:  # and nothing outside the scheme is bound to it
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP/UDP port reserved for this process until it exits."""
    PORT_LOCKS.mkdir(mode=0o777, exist_ok=True)
    lo, hi = PORT_RANGE
    start = random.Random(os.getpid() * 7919 + time.monotonic_ns()).randrange(lo, hi)
    for i in range(hi - lo):
        port = lo + (start - lo + i) % (hi - lo)
        if _claim(port):
            return port
    raise RuntimeError("no free test port in %d-%d" % PORT_RANGE)


def free_ports(n: int) -> list[int]:
    """n distinct reserved loopback ports."""
    return [free_port() for _ in range(n)]


def nanocat() -> str:
    exe = shutil.which("nanocat")
    if exe is None:
        raise RuntimeError("nanocat not installed: run `make setup` (Debian nanomsg-utils)")
    return exe


@contextlib.asynccontextmanager
async def bridge_with_boards(tmp: Path, n: int, *, app: str = "demo", period_ms: int = 1000,
                             extra: dict[str, Any] | None = None,
                             **cfg: Any) -> AsyncIterator[Bridge]:
    """A bridge with n simulated boards, SP endpoints on free ports (cfg["pub"/"sub"]).
    The boards have no key and publish anywhere (sim_keys false, anonymous boards allowed
    unless a keys file is given), what most tests of other things want; sim_keys=True
    makes the keyed, confined boards of `pubmote bridge --sim-boards`."""
    conf = load_config(None, {"sim_boards": n, "sim_dir": str(tmp), "sim_period_ms": period_ms,
                              "timeout_ms": 1000, "sim_app": app, "sim_app_dir": str(APPS),
                              "sim_app_config": extra or {}, "sim_keys": False,
                              "allow_anonymous_boards": "keys" not in cfg, **cfg})
    bridge = Bridge(conf, fleet=SimFleet.from_config(conf) if n else None)
    async with bridge:
        yield bridge


async def wait_until(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout_s, what))
        await asyncio.sleep(0.05)


async def boards_registered(bridge: Bridge, names: list[str], timeout_s: float = 60) -> None:
    await wait_until(lambda: all((b := bridge.hub.board(n)) is not None and b.up
                                 for n in names), timeout_s, "boards %s to register" % names)


async def sp_connected(bridge: Bridge, timeout_s: float = 10) -> None:
    """Wait until every SP endpoint of the bridge has a client past the SP handshake."""
    await wait_until(lambda: all(any(c.ready for c in ep.conns) for ep in bridge.sp),
                     timeout_s, "SP clients to connect")


class TimedLines:
    """An SP subscriber noting when each line arrived."""

    def __init__(self, url: str, prefix: bytes) -> None:
        self.sock = pynng.Sub0(recv_buffer_size=4096)
        self.sock.dial(url, block=False)
        self.sock.subscribe(prefix)
        self.lines: list[tuple[float, bytes]] = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        with contextlib.suppress(pynng.Closed):
            while True:
                line = await self.sock.arecv()
                self.lines.append((time.monotonic(), line))

    def of(self, prefix: bytes) -> list[tuple[float, bytes]]:
        return [(t, x) for t, x in self.lines if x.startswith(prefix)]

    def close(self) -> None:
        self.task.cancel()
        self.sock.close()


def journal_records(d: Path) -> list[dict[str, Any]]:
    """Every record of a bridge's journal folder d, file by file (the finished files:
    a bridge renames its in-progress one into place as it stops)."""
    out: list[dict[str, Any]] = []
    for f in sorted(d.glob("journal-*.jsonl")):
        out.extend(json.loads(line) for line in f.read_text().splitlines())
    return out


class Collector:
    """A pynng SUB socket collecting `<topic>|<payload>` lines in a background task."""

    def __init__(self, url: str, *prefixes: bytes) -> None:
        # never block the loop: the bridge under test runs in it
        # redial fast: a test that restarts the bridge must not lose messages to nng's backoff
        self.sock = pynng.Sub0(recv_buffer_size=4096, reconnect_time_min=20,
                               reconnect_time_max=50)
        self.sock.dial(url, block=False)
        for p in prefixes:
            self.sock.subscribe(p)
        self.lines: list[bytes] = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        with contextlib.suppress(pynng.Closed):
            while True:
                self.lines.append(await self.sock.arecv())

    def with_prefix(self, prefix: bytes) -> list[bytes]:
        return [x for x in self.lines if x.startswith(prefix)]

    async def wait_for(self, prefix: bytes, count: int = 1, timeout_s: float = 30) -> list[bytes]:
        await wait_until(lambda: len(self.with_prefix(prefix)) >= count, timeout_s,
                         "%d messages starting %r (have %d)" % (count, prefix,
                                                                 len(self.with_prefix(prefix))))
        return self.with_prefix(prefix)

    def close(self) -> None:
        self.task.cancel()
        self.sock.close()


class Publisher:
    """A pynng PUB socket dialled to the bridge's SUB endpoint."""

    def __init__(self, url: str) -> None:
        self.sock = pynng.Pub0()
        self.sock.dial(url, block=False)

    async def send(self, line: bytes) -> None:
        await self.sock.asend(line)

    def close(self) -> None:
        self.sock.close()


def relayed_records(journal: Path, topic: str) -> list[dict[str, Any]]:
    """The `relayed` records of topic in a bridge's journal folder, in order (every run's,
    once each has stopped): the record of what reached the bridge. A subscriber
    re-dialling a restarted bridge can miss the first messages it relays: SP's PUB sends
    only to subscribers connected then."""
    return [r for r in journal_records(journal)
            if r.get("outcome") == "relayed" and r.get("topic") == topic]


def relayed_lines(journal: Path, prefix: bytes) -> list[bytes]:
    """relayed_records of the topic of `prefix` (`topic|`) as `topic|payload` lines, as an
    SP subscriber would have heard them."""
    return [prefix + bytes.fromhex(r["payload"])
            for r in relayed_records(journal, prefix[:-1].decode())]


class BridgeProcess:
    """`pubmote bridge` in a process of its own on one board's serial line (SP PUB and SUB
    on free loopback ports, anonymous boards allowed), for a test that stops it and starts
    it again: an outage, a crash."""

    def __init__(self, serial: str, *extra: str) -> None:
        self.sp_pub = "tcp://127.0.0.1:%d" % free_port()
        self.sp_sub = "tcp://127.0.0.1:%d" % free_port()
        self.args = [str(Path(sys.executable).parent / "pubmote"), "bridge", "--no-view",
                     "--serial", serial, "--sp-pub", self.sp_pub, "--sp-sub", self.sp_sub,
                     "--allow-anonymous-boards", *extra]
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(*self.args,
                                                         stderr=asyncio.subprocess.DEVNULL)

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        """sig (SIGTERM: stopped; SIGKILL: crashed), then reaped; nothing if not running."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            await self.proc.wait()


async def probe_ctl(bridge_pub: Publisher, col: Collector, board: str, cmd: bytes,
                    *, resend: bool = False) -> None:
    """Send a command to a probe board (board_apps/probe_app.py) and wait for its
    confirmation. Commands are sent once (sub/unsub are reference-counted, as in nanomsg);
    resend=True is for idempotent ones against a bridge in another process, where the first
    may go before the dial."""
    done = b"/test/%s/ctl-done|%s" % (board.encode(), cmd)
    before = len(col.with_prefix(done))
    for _ in range(40 if resend else 1):
        await bridge_pub.send(b"/test/%s/ctl|%s" % (board.encode(), cmd))
        try:
            await col.wait_for(done, before + 1, timeout_s=0.5 if resend else 10)
            return
        except AssertionError:
            continue
    raise AssertionError("board %s did not confirm %r" % (board, cmd))


async def probe_report(pub: Publisher, col: Collector, board: str,
                       resend: bool = False) -> dict[str, object]:
    """A probe board's report (sent, failed, got, filtered), CBOR decoded."""
    prefix = b"/test/%s/report|" % board.encode()
    n = len(col.with_prefix(prefix))
    await probe_ctl(pub, col, board, b"report", resend=resend)
    lines = await col.wait_for(prefix, n + 1)
    result: dict[str, object] = cbor2.loads(lines[-1][len(prefix):])
    return result
