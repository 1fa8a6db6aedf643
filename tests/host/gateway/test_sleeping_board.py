"""A simulated board that deep-sleeps in a loop (1 s asleep, 300 ms awake; on the unix
port its process ends and is started again, so nothing survives in the board's RAM):
commands sent by an SP publisher at random times all reach it, each at its next wake at
the latest, none lost, none twice, in order; while it sleeps the bridge's status says it
is asleep and when it is expected back (docs/protocols/sleep.md)."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest

from e2e import (
    Publisher,
    TimedLines,
    boards_registered,
    bridge_with_boards,
    free_port,
    sp_connected,
    wait_until,
)
from pubmote.gateway.status import asleep_note, status_line

CYCLES = 10


@pytest.mark.timeout(600)  # ten cycles, each a board process's start: slow on a busy box
def test_sleeping_board_gets_every_command_at_its_next_wake(tmp_path: Path) -> None:
    cycles = CYCLES

    async def run() -> None:
        urls: dict[str, Any] = {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
                                                "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}
        extra = {"sleep_ms": 1000, "awake_ms": 300}
        async with bridge_with_boards(tmp_path, 1, app="sleepy_app", extra=extra,
                                      **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            col = TimedLines(urls["sp_pub"][0], b"/sleepy/sim1/")
            pub = Publisher(urls["sp_sub"][0])
            try:
                await sp_connected(bridge)
                awake = b"/sleepy/sim1/awake|"
                n0 = len(col.of(awake))
                await wait_until(lambda: len(col.of(awake)) > n0, 90, "the board's wake")
                rng = random.Random(31)
                sent: list[tuple[float, bytes]] = []
                seen_asleep = []
                k = 0
                while len(col.of(awake)) < n0 + 1 + cycles:
                    await asyncio.sleep(rng.uniform(0.05, 0.6))
                    cmd = b"c%d" % k
                    k += 1
                    sent.append((time.monotonic(), cmd))
                    await pub.send(b"/sleepy/sim1/cmd|" + cmd)
                    b = bridge.hub.board("sim1")
                    if b is not None and b.asleep:
                        seen_asleep.append((asleep_note(b), status_line(bridge)))
                want = [c for _, c in sent]
                got_prefix = b"/sleepy/sim1/got|"
                await wait_until(lambda: len(col.of(got_prefix)) >= len(want), 90,
                                 "every command at the board")
                # a command delivered twice would come at a wake: two more of them, the
                # first's awake time whole, let any such copy show
                n_wakes = len(col.of(awake))
                await wait_until(lambda: len(col.of(awake)) >= n_wakes + 2, 90,
                                 "two more wakes")
                got = col.of(got_prefix)
                cmds = [x[len(got_prefix):].split(b" ")[0] for _, x in got]
                assert cmds == want, (cmds, want)  # none lost, none twice, in order
                # each at the next wake at the latest: before the second wake after it was
                # sent (a command sent while the board was awake arrives in that wake)
                wakes = [t for t, _ in col.of(awake)]
                for (t_sent, cmd), (t_got, _) in zip(sent, got, strict=True):
                    after = [t for t in wakes if t > t_sent]
                    if len(after) >= 2:
                        assert t_got < after[1], "%r came a wake late" % cmd
                assert len(wakes) >= cycles
                assert seen_asleep, "the board was never seen asleep"
                note, line = seen_asleep[0]
                assert note is not None and note.startswith("asleep, expected back")
                assert "asleep 1: sim1 (asleep, expected back" in line
                c = bridge.hub.stats()
                assert c["sleeps"] >= cycles and c["wakes"] >= cycles - 1
                assert c["sleep_dropped"] == 0 and c["sleep_expired"] == 0
            finally:
                col.close()
                pub.close()

    asyncio.run(run())
