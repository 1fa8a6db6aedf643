"""Real libp2p peers for the mesh interop tests and bench: js-libp2p (node) and
py-libp2p (its own venv), each a child process driven by JSON lines on stdin/stdout.

A peer prints {"event": "ready", "peer": ..., "addrs": [...]} once listening, then answers
each {"id": n, "cmd": ...} with {"id": n, "ok": true|false, ...}. Processes are killed by
PID (their process group) when the test is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
JS_DIR = HERE / "js"
PY_DIR = HERE / "py"
PYLIBP2P_PYTHON = ROOT / "build" / "peers" / "pylibp2p" / "bin" / "python"


def js_command(*args: str) -> list[str]:
    return ["node", str(JS_DIR / "peer.mjs"), *args]


def py_command(*args: str) -> list[str]:
    return [str(PYLIBP2P_PYTHON), str(PY_DIR / "peer.py"), *args]


def check_installed() -> None:
    """Fail (not skip) with the command to run when a peer is not installed."""
    if not (JS_DIR / "node_modules" / ".installed").exists() and not (
            JS_DIR / "node_modules" / "libp2p").exists():
        raise RuntimeError("js-libp2p peer not installed: run `make setup`")
    if not PYLIBP2P_PYTHON.exists():
        raise RuntimeError("py-libp2p peer not installed: run `make setup`")


T = TypeVar("T")


class LoopRunner:
    """Runs coroutines on one loop that outlives single tests (peers are per module)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout_s))

    def close(self) -> None:
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


class PeerProcess:
    """One running peer. `await PeerProcess.start(cmd)`, then `await peer.call(...)`."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self.peer_id = ""
        self.addrs: list[str] = []
        self._next = 0
        self._waiters: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.ensure_future(self._read_loop())
        self.stderr_tail: list[str] = []
        self._err_reader = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def start(cls, cmd: list[str], name: str, *, timeout_s: float = 30.0) -> PeerProcess:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, limit=1 << 20)
        peer = cls(proc, name)
        try:
            ready = await asyncio.wait_for(asyncio.shield(peer._ready), timeout_s)
        except BaseException as e:
            await peer.kill()  # cancelled or interrupted too: no peer left behind
            if not isinstance(e, Exception):
                raise
            raise RuntimeError("%s did not start: %s"
                               % (name, "".join(peer.stderr_tail)[-2000:])) from None
        peer.peer_id = ready["peer"]
        peer.addrs = ready["addrs"]
        return peer

    @property
    def addr(self) -> str:
        """Its first 127.0.0.1 address with /p2p/."""
        a = next(a for a in self.addrs if a.startswith("/ip4/127.0.0.1/"))
        return a if "/p2p/" in a else a + "/p2p/" + self.peer_id

    async def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("event") == "ready" and not self._ready.done():
                self._ready.set_result(msg)
            elif "id" in msg:
                fut = self._waiters.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        err = RuntimeError("%s exited: %s" % (self.name, "".join(self.stderr_tail)[-2000:]))
        if not self._ready.done():
            self._ready.set_exception(err)
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(err)

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                break
            self.stderr_tail.append(line.decode(errors="replace"))
            del self.stderr_tail[:-50]

    async def call(self, cmd: str, *, timeout_s: float = 20.0, **kw: Any) -> dict[str, Any]:
        """Run a command in the peer; RuntimeError when it answers ok=false."""
        self._next += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[self._next] = fut
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"id": self._next, "cmd": cmd, **kw}) + "\n").encode())
        await self.proc.stdin.drain()
        res = await asyncio.wait_for(fut, timeout_s)
        if not res.get("ok"):
            raise RuntimeError("%s %s failed: %s" % (self.name, cmd, res.get("error")))
        return res

    async def kill(self) -> None:
        """SIGKILL the peer's process group (by PID) and reap it."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 5.0)
        for t in (self._reader, self._err_reader):
            t.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(self._reader, self._err_reader, return_exceptions=True)


def _gossip_args(gossip: bool | dict[str, Any]) -> list[str]:
    if gossip is False:
        return []
    opts = gossip if isinstance(gossip, dict) else {}
    return ["--gossip", "--gossip-opts", json.dumps(opts)]


async def start_js(*, gossip: bool | dict[str, Any] = False, **_kw: Any) -> PeerProcess:
    """A js-libp2p peer; `gossip` (True or @libp2p/gossipsub options) adds GossipSub."""
    return await PeerProcess.start(js_command(*_gossip_args(gossip)), "js-libp2p")


async def start_py(*, gossip: bool | dict[str, Any] = False, **_kw: Any) -> PeerProcess:
    """A py-libp2p peer; `gossip` (True or {"D":..., "heartbeat_s":...}) adds GossipSub."""
    return await PeerProcess.start(py_command(*_gossip_args(gossip)), "py-libp2p")


if __name__ == "__main__":  # manual poking: python peers.py js|py
    async def _main() -> None:
        p = await (start_js() if sys.argv[1:] == ["js"] else start_py())
        print(p.peer_id, p.addrs)
        await p.kill()
    asyncio.run(_main())
