"""The hub's background tasks and its contained failures: every task it starts is kept,
cancelled on close, and a task that fails is counted and logged, never silent."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("pubmote.hub")


def count_fault(counters: dict[str, int], key: str, what: str) -> None:
    """Count a contained failure (called in an except block) and log it with its
    traceback: the first of each kind, then every 1000th (a peer that provokes it over and
    over must not flood the log)."""
    counters[key] += 1
    n = counters[key]
    if n == 1 or n % 1000 == 0:
        log.exception("%s failed (%d so far, counted in %s)", what, n, key)


class TaskSet:
    """The tasks one owner started; failures counted in counters["task_errors"]."""

    def __init__(self, counters: dict[str, int]) -> None:
        self._counters = counters
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._done)
        return t

    def _done(self, t: asyncio.Task[Any]) -> None:
        self._tasks.discard(t)
        if t.cancelled():
            return
        exc = t.exception()  # retrieved: a failed task is counted, never silent
        if exc is not None:
            self._counters["task_errors"] += 1
            n = self._counters["task_errors"]
            if n == 1 or n % 1000 == 0:
                log.error("hub task %s failed (%d so far, counted in task_errors)",
                          t.get_coro(), n, exc_info=exc)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Any:
        return iter(list(self._tasks))

    async def close(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
