"""What several `pubmote` commands share: a flag's JSON object, running a coroutine in an
event loop that a Ctrl-C cannot leave half made, and running one until Ctrl-C or SIGTERM
with every `finally` run (exit status 130 after Ctrl-C, 0 after SIGTERM)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pubmote import procs

T = TypeVar("T")


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


def run_async(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """asyncio.run(main()), with a Ctrl-C that comes while the event loop is being made
    raised once it is made (then closed): a half-made loop's finaliser printed a traceback,
    and a coroutine made before it was never awaited (seen at a command's start-up)."""
    runner = asyncio.Runner()
    try:
        with procs.interrupt_after():
            runner.__enter__()  # makes the loop
        return runner.run(main())
    finally:
        runner.close()


EXIT_SIGINT = 130  # 128 + SIGINT, as a shell reports an interrupted command
EXIT_SIGTERM = 0  # a stop asked for by SIGTERM (systemd, docker stop) that went in order


def run_until_interrupted(main: Callable[[], Coroutine[Any, Any, Any]]) -> int:
    """Run main(); SIGINT and SIGTERM both cancel it once, so every `finally` runs (for the
    bridge: its orderly stop, bridge.Bridge.stop). A second signal while it stops is
    ignored, so it cannot cut that stop short (it is bounded in time). Exit status: 0
    when main() ends or after SIGTERM, 130 after SIGINT, 1 for an OSError/ValueError."""
    got: list[int] = []

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()

        def on_signal(sig: int) -> None:
            if got:
                print("pubmote: already stopping (delivering what was acked first)",
                      file=sys.stderr, flush=True)
                return
            got.append(sig)
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        run_async(runner)
    except (OSError, ValueError) as e:
        print("pubmote: %s" % e, file=sys.stderr)
        return 1
    if got and got[0] == signal.SIGINT:
        return EXIT_SIGINT
    return EXIT_SIGTERM if got else 0
