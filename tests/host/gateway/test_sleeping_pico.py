"""A sleeping board on the emulated Pico (the real rp2 firmware, pubmote frozen in,
rp2040js; UART0 at 115200 baud on a pty to the bridge): its app deep-sleeps in a loop
(machine.deepsleep: a light sleep on the timer, then the watchdog's reset, the emulator
powered on again from its flash chip and the app started again through main.py, nothing
of its RAM kept). Commands sent by an SP publisher while it sleeps, and as it wakes, all
reach it at its next wake at the latest, none lost, none twice (a copy only where
docs/protocols/sleep.md allows one: a notify answered just as the board fell asleep, which
the bridge counts as requeued). A few cycles: each wake is a whole boot of the emulator."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
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

# wakes after the first; PUBMOTE_PICO_SLEEP_CYCLES runs more (a soak, by hand)
CYCLES = int(os.environ.get("PUBMOTE_PICO_SLEEP_CYCLES", "3"))
SLEEP_MS = 1000
AWAKE_MS = 300
BOOT_S = 300  # an emulated Pico's boot to its registration, on a loaded machine
CYCLE_S = 180  # one sleep and the next boot's registration, on a loaded machine
AWAKE = b"/sleepy/sim1/awake|"
GOT = b"/sleepy/sim1/got|"
CMD = b"/sleepy/sim1/cmd|"


@pytest.mark.timeout(1500)  # a firmware build on a loaded machine, then the cycles
def test_sleeping_pico_gets_every_command_at_its_next_wake(built: None, tmp_path: Path) -> None:
    async def run() -> None:
        # the bridge's own timeout_ms (2000, not the tests' 1000): a round of its 3 retries
        # is 6 s, and a woken board silent for two rounds is given up on
        urls: dict[str, Any] = {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
                                "sp_sub": ["tcp://127.0.0.1:%d" % free_port()],
                                "timeout_ms": 2000}
        extra = {"sleep_ms": SLEEP_MS, "awake_ms": AWAKE_MS}
        async with bridge_with_boards(tmp_path, 1, app="sleepy_app", extra=extra,
                                      sim_kind="pico", **urls) as bridge:
            await boards_registered(bridge, ["sim1"], BOOT_S)
            col = TimedLines(urls["sp_pub"][0], b"/sleepy/sim1/")
            pub = Publisher(urls["sp_sub"][0])
            sent: list[tuple[float, bytes, str]] = []  # when, command, the board's state

            async def send(state: str) -> None:
                cmd = b"c%d" % len(sent)
                sent.append((time.monotonic(), cmd, state))
                await pub.send(CMD + cmd)

            def woke_after(n: int) -> Callable[[], bool]:
                return lambda: len(col.of(AWAKE)) > n

            def asleep() -> bool:
                b = bridge.hub.board("sim1")
                return b is not None and b.asleep

            try:
                await sp_connected(bridge)
                await wait_until(lambda: len(col.of(AWAKE)) >= 1, BOOT_S, "the board's wake")
                for i in range(CYCLES):
                    await wait_until(asleep, CYCLE_S, "sleep %d" % (i + 1))
                    # two while it sleeps: held by the bridge for its wake
                    await send("asleep")
                    await send("asleep")
                    await wait_until(woke_after(len(col.of(AWAKE))), CYCLE_S,
                                     "wake %d" % (i + 1))
                    # one as it wakes: taken in this wake, or held for the next
                    await send("awake")
                want = [c for _, c, _ in sent]
                await wait_until(lambda: len(col.of(GOT)) >= len(want), CYCLE_S,
                                 "every command at the board")
                # a copy would come at a wake: one more, the last command's wake whole
                await wait_until(woke_after(len(col.of(AWAKE))), CYCLE_S, "one more wake")
                await wait_until(asleep, CYCLE_S, "the last sleep")
                got = [x[len(GOT):].split(b" ")[0] for _, x in col.of(GOT)]
                c = bridge.hub.stats()
                firsts = list(dict.fromkeys(got))
                assert firsts == want, (got, want)  # none lost, in order
                copies = len(got) - len(firsts)
                assert copies <= c["sleep_requeued"], (got, c)  # none twice, but as allowed
                # each at its next wake at the latest: before the second wake after it was
                # sent (one sent as the board woke may come in that wake)
                wakes = [t for t, _ in col.of(AWAKE)]
                at = dict(reversed([(x[len(GOT):].split(b" ")[0], t) for t, x in col.of(GOT)]))
                for t_sent, cmd, _ in sent:
                    after = [t for t in wakes if t > t_sent]
                    if len(after) >= 2:
                        assert at[cmd] < after[1], "%r came a wake late" % cmd
                assert c["sleeps"] >= CYCLES and c["wakes"] >= CYCLES
                assert c["sleep_dropped"] == 0 and c["sleep_expired"] == 0
                b = bridge.hub.board("sim1")
                assert b is not None
                assert b.counters["deliver_failed"] == 0, b.counters
                print("emulated Pico asleep %d ms / awake %d ms: %d wakes, commands sent %d, "
                      "delivered %d, lost %d, copies %d; bridge: notify rounds again %d, "
                      "requeued %d" % (SLEEP_MS, AWAKE_MS, len(wakes) - 1, len(want),
                                       len(firsts), len(want) - len(firsts), copies,
                                       c["sleep_retried"], c["sleep_requeued"]))
            finally:
                col.close()
                pub.close()

    asyncio.run(run())
