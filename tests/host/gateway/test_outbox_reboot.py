"""The durable outbox end to end: a board runs the demo app with `outbox_dir` set. Its bridge
is stopped; during the outage the board's power is cut and it boots again; once the bridge
is back every reading taken before the cut arrives, in order, then those of the second
boot: none lost. On a simulated board (the MicroPython unix port, its working directory its
flash, SIGKILL for the cut, a reading every 200 ms; also with all but 4 of the readings on
flash only) and on an emulated Pico (the rp2 firmware, its flash chip image kept across the
cut, a reading every 500 ms). What arrived is what the bridge relayed, from its journal: a
subscriber re-dialling the restarted bridge may miss the first of the readings it sends on."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from pathlib import Path
from typing import Any

import cbor2
import pytest

from e2e import BridgeProcess, Collector, relayed_lines
from pubmote.boards import fwbuild
from pubmote.boards.emu import PicoBoard
from pubmote.boards.sim import SimBoard
from pubmote_node.outlog import OutLog

PERIOD_MS = {"unix": 200, "unix-flash": 200, "pico": 500}
OUTAGE_S = {"unix": 3.0, "unix-flash": 3.0, "pico": 5.0}  # on each side of the power cut
# unix-flash: 4 messages in RAM, the rest on flash only (outbox_log_bytes), read back in
# as the head leaves, before and after the cut
FLASH_ONLY = {"outbox_len": 4, "outbox_log_bytes": 65536}
TOPIC = b"/pubmote/demo/sim1/temperature|"


def _boots(lines: list[bytes]) -> tuple[list[list[int]], bool, list[list[float]]]:
    """Each boot's readings, by seq, in their order of first arrival (the demo counts from 0
    at every boot), and whether each boot's came in the order they were taken (t_ms). A
    message whose ack the cut or the outage lost is sent again, so it may arrive twice: as
    the outbox sends in order, right after itself or the one behind it (same seq, same
    t_ms). Also each boot's taken-times. Only those recent ones count as copies: an emulated Pico's boots are alike to
    the millisecond, so its second boot's first readings match its first boot's."""
    boots: list[list[tuple[int, float]]] = []
    for x in lines:
        r = cbor2.loads(x[len(TOPIC):])
        key = (int(r["seq"]), r["t_ms"])
        if boots and key in boots[-1][-4:]:
            continue
        if not boots or key[0] <= boots[-1][-1][0]:
            boots.append([])
        boots[-1].append(key)
    return ([[k[0] for k in b] for b in boots],
            all([k[1] for k in b] == sorted(k[1] for k in b) for b in boots),
            [[k[1] for k in b] for b in boots])


async def _reboot_in_outage(tmp: Path, kind: str) -> dict[str, Any]:
    period_ms, outage_s = PERIOD_MS[kind], OUTAGE_S[kind]
    if kind == "pico":
        board: SimBoard = PicoBoard("sim1", tmp, period_ms=period_ms,
                                    extra={"outbox_dir": "/outbox"})
    else:
        # an outbox far larger than the outage fills, however long a loaded machine
        # stretches it: the bound is not what this tests (unix-flash: 4 in RAM, the rest
        # on flash only)
        board = SimBoard("sim1", tmp, period_ms=period_ms, extra={
            "outbox_dir": "outbox", "outbox_len": 512, "outbox_bytes": 65536,
            **(FLASH_ONLY if kind == "unix-flash" else {})})
    board.start()
    journal = tmp / "journal"
    bridge = BridgeProcess(board.port, "--journal", str(journal))
    await bridge.start()
    col = Collector(bridge.sp_pub, TOPIC)
    try:
        await col.wait_for(TOPIC, 10, timeout_s=180)
        # the outage lasts outage_s of the board's time: an emulated Pico starved of CPU
        # takes its readings slower than the wall clock, and would take too few of them in
        # outage_s of the wall's for the count below to mean anything. A unix-port board's
        # clock is the host's: its readings' arrivals, bunched and spread by a loaded
        # machine, once made a stretch of several times, an outage of more readings than
        # its heap holds in the outbox (a 35 s one: 175 in the log at the cut, and the
        # reboot's replay kept only the newest, from the 120th: the heap's bound, by
        # design, counted in outbox_dropped)
        stretch = 1 / await board_speed(col) if kind == "pico" else 1.0
        await bridge.stop()
        before = len(_boots(relayed_lines(journal, TOPIC))[0][0])
        await asyncio.sleep(outage_s * stretch)  # the board takes its readings, the bridge away
        board.power_off()
        left = None
        if kind != "pico":
            # what the cut left on the board's flash: the readings the second boot starts
            # with (read from a copy: replay removes the segments it finds done)
            shutil.copytree(tmp / "outbox", tmp / "outbox-at-cut")
            log = OutLog(str(tmp / "outbox-at-cut"))
            left = [cbor2.loads(f[1])["seq"] for f in log.replay()]
        board.start()
        await asyncio.sleep(outage_s * stretch)
        assert board.crashed() is None, board.crashed()
        await bridge.start()
        # the second boot's readings in the outage (fewer: it booted first), and a few more
        await wait_second_boot(col, int(0.5 * outage_s * 1000 / period_ms) + 5)
    finally:
        col.close()
        await bridge.stop()
        board.stop()
    boots, in_order, times = _boots(relayed_lines(journal, TOPIC))
    # the first boot's longest gap between two readings, on its own clock: an emulated
    # Pico starved of CPU runs slower than the wall clock, its period does not
    return {"boots": boots, "in_order": in_order, "left": left, "before": before,
            "taken_in_outage": outage_s * 1000 / period_ms, "period_ms": period_ms,
            "max_gap_ms": max(b - a for a, b in itertools.pairwise(times[0]))}


async def board_speed(col: Collector, n: int = 5) -> float:
    """The board's clock against the wall's (at most 1, at least 0.1): the board-time
    between the arrivals of two of its readings n apart, over the wall time between them."""
    async def next_arrival(count: int) -> tuple[float, float]:
        async with asyncio.timeout(180):
            while len(col.with_prefix(TOPIC)) < count:
                await asyncio.sleep(0.02)
        return time.monotonic(), _boots(col.with_prefix(TOPIC))[2][-1][-1]

    have = len(col.with_prefix(TOPIC))
    wall0, board0 = await next_arrival(have + 1)
    wall1, board1 = await next_arrival(have + 1 + n)
    return min(1.0, max(0.1, (board1 - board0) / 1000 / max(wall1 - wall0, 1e-3)))


async def wait_second_boot(col: Collector, n2: int) -> None:
    async with asyncio.timeout(180):
        while True:
            boots = _boots(col.with_prefix(TOPIC))[0]
            if len(boots) >= 2 and len(boots[-1]) >= n2:
                return
            await asyncio.sleep(0.1)


@pytest.fixture
def built(kind: str) -> None:
    if kind == "pico":
        fwbuild.build("pico", progress=lambda line: None)


@pytest.mark.timeout(900)  # a firmware build on a loaded machine, for the Pico
@pytest.mark.parametrize("kind", ["unix", "unix-flash", "pico"])
def test_readings_survive_a_power_cut_in_the_outage(kind: str, built: None,
                                                    tmp_path: Path) -> None:
    r = asyncio.run(_reboot_in_outage(tmp_path, kind))
    assert len(r["boots"]) == 2 and r["in_order"], r
    boot1, boot2 = r["boots"]
    # the first boot's readings: every one it took before the cut, in order (at most the
    # one being written when the power went is missing)
    assert boot1 == list(range(len(boot1))), r
    # the app kept its period through the outage (its clock's: an emulated Pico starved of
    # CPU takes fewer readings by the wall clock)
    assert r["max_gap_ms"] <= 2 * r["period_ms"], r
    assert len(boot1) - r["before"] >= 0.5 * r["taken_in_outage"], r
    left = r["left"]
    if left is not None:  # the log at the cut held the outage's readings, the last taken
        assert left and left == list(range(left[0], left[-1] + 1)), r
        assert boot1[-1] == left[-1], r
        assert len(left) >= 0.8 * r["taken_in_outage"], r
    # then the second boot's, from its first reading on
    assert boot2 == list(range(len(boot2))) and len(boot2) >= 0.5 * r["taken_in_outage"], r
