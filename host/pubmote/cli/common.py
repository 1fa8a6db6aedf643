"""What several `pubmote` commands share: a flag's JSON object, and running a coroutine
until Ctrl-C or SIGTERM with every `finally` run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from typing import Any


def json_object(text: str | None, flag: str) -> dict[str, Any] | None:
    """A flag's JSON object, or None when not given; a ValueError naming the flag."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError("%s %s: not JSON (%s); e.g. '{\"period_ms\": 200}'"
                         % (flag, text, e.msg)) from None
    if not isinstance(value, dict):
        raise ValueError("%s %s: expected a JSON object, e.g. '{\"period_ms\": 200}'"
                         % (flag, text))
    return value


def run_until_interrupted(coro: Any) -> int:
    """Run coro; SIGINT/SIGTERM cancel it so every `finally` runs and nothing is left behind."""

    async def runner() -> None:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(runner())
    except (OSError, ValueError) as e:
        print("pubmote: %s" % e, file=sys.stderr)
        return 1
    return 0
