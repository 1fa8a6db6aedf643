"""Helpers for the end-to-end tests: free loopback ports, a bridge with simulated boards
in this process, SP clients (pynng, nanocat) with bounded waits."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pynng

from pubmote_bridge.bridge import Bridge, load_config

APPS = Path(__file__).resolve().parent / "board_apps"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports: all bound at once, so none is handed out twice (as
    separate free_port() calls may, for ports not yet bound by their users)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def nanocat() -> str:
    exe = shutil.which("nanocat")
    if exe is None:
        raise RuntimeError("nanocat not installed: run `make setup` (Debian nanomsg-utils)")
    return exe


@contextlib.asynccontextmanager
async def bridge_with_boards(tmp: Path, n: int, *, app: str = "demo", period_ms: int = 1000,
                             extra: dict[str, Any] | None = None,
                             **cfg: Any) -> AsyncIterator[Bridge]:
    """A bridge with n simulated boards, SP endpoints on free ports (cfg["pub"/"sub"])."""
    conf = load_config(None, {"sim_boards": n, "sim_dir": str(tmp), "sim_period_ms": period_ms,
                              "timeout_ms": 1000, "sim_app": app, "sim_app_dir": str(APPS),
                              "sim_app_config": extra or {}, **cfg})
    bridge = Bridge(conf)
    async with bridge:
        yield bridge


async def wait_until(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout_s, what))
        await asyncio.sleep(0.05)


async def boards_registered(bridge: Bridge, names: list[str], timeout_s: float = 15) -> None:
    await wait_until(lambda: all(n in bridge.hub.boards and bridge.hub.boards[n].face.up
                                 for n in names), timeout_s, "boards %s to register" % names)


async def sp_connected(bridge: Bridge, timeout_s: float = 10) -> None:
    """Wait until every SP endpoint of the bridge has a client past the SP handshake."""
    await wait_until(lambda: all(any(c.ready for c in ep.conns) for ep in bridge.sp),
                     timeout_s, "SP clients to connect")


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

    async def wait_for(self, prefix: bytes, count: int = 1, timeout_s: float = 15) -> list[bytes]:
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
