"""Board faces that a peer holds without being a board are given back: a face on which no
board has registered within `register_timeout_s` of its start, or on which nothing has
arrived for `idle_timeout_s`, is closed (counted under those limits). A real board
registers at once and re-registers every few seconds (its keepalive), so neither fires for
it. Used by the listeners that make a face per peer (--tcp, --udp); never for a serial
line, which is the board's own cable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from pubmote.core.limits import LimitHits
from pubmote.faces.board import BoardFace

log = logging.getLogger("pubmote.faces")


class FaceWatch:
    """Closes the watched faces that idle or never register; `watch(face)` when a face
    starts, `forget(face)` when it ends; `start()`/`close()` its periodic check."""

    def __init__(self, *, register_timeout_s: float, idle_timeout_s: float,
                 hits: LimitHits) -> None:
        self.register_timeout_s = register_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.hits = hits
        self._since: dict[BoardFace, float] = {}  # face -> when it started (monotonic)
        self._task: asyncio.Task[None] | None = None

    def watch(self, face: BoardFace) -> None:
        self._since[face] = time.monotonic()

    def forget(self, face: BoardFace) -> None:
        self._since.pop(face, None)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        # a face overstays its timeout by at most a quarter of the shorter one
        every_s = max(0.05, min(self.register_timeout_s, self.idle_timeout_s) / 4)
        while True:
            await asyncio.sleep(every_s)
            await self.sweep()

    async def sweep(self) -> None:
        """Close every face past a timeout, after reading what has already arrived: on a
        loop busy with a flood, this check can come due while a board's registration or
        keepalive waits unread in its socket, and that board is not one to close."""
        if not self._due(time.monotonic()):
            return
        # two turns of the loop: the first polls the sockets and queues their reads
        # behind this task, the second runs them before the check below
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        self.check(time.monotonic())

    def _due(self, now: float) -> list[tuple[BoardFace, str, str, float]]:
        out = []
        for face, since in self._since.items():
            if face.board is None and now - since > self.register_timeout_s:
                out.append((face, "board_register_timeout_s", "no board registered in %.0f s",
                            self.register_timeout_s))
            elif now - face.t_seen > self.idle_timeout_s:
                out.append((face, "board_idle_timeout_s", "nothing received for %.0f s",
                            self.idle_timeout_s))
        return out

    def check(self, now: float) -> None:
        """Close every face past a timeout (at once: `sweep` reads the sockets first)."""
        for face, key, why, limit in self._due(now):
            self.forget(face)
            self.hits.hit(key, "%s closed: " + why, face.label, limit)
            face.close()
