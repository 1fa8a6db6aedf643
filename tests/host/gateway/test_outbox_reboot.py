"""The durable outbox end to end: a simulated board (the MicroPython unix port, its working
directory its flash) runs the demo app with `outbox_dir` set, publishing every 200 ms. Its
bridge is stopped; during the outage the board's power is cut (SIGKILL) and it boots again;
once the bridge is back every reading taken before the cut arrives, in order, then those of
the second boot: none lost."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import cbor2
import pytest

from e2e import Collector, free_port
from pubmote.boards.sim import SimBoard
from pubmote_node.outlog import OutLog

PERIOD_MS = 200
OUTAGE_S = 3.0  # on each side of the power cut
TOPIC = b"/pubmote/demo/sim1/temperature|"


def _boots(lines: list[bytes]) -> tuple[list[list[int]], bool]:
    """Each boot's readings, by seq, in their order of first arrival (a message whose ack
    the cut or the outage lost may arrive twice: same reading, same t_ms), and whether
    those first arrivals came in the order they were taken (t_ms: the unix port's
    monotonic clock, which a reboot does not restart; the demo's seq starts at 0)."""
    seen: set[float] = set()
    boots: list[list[int]] = []
    times: list[float] = []
    for x in lines:
        r = cbor2.loads(x[len(TOPIC):])
        if r["t_ms"] in seen:
            continue
        seen.add(r["t_ms"])
        times.append(r["t_ms"])
        if not boots or r["seq"] <= boots[-1][-1]:
            boots.append([])
        boots[-1].append(int(r["seq"]))
    return boots, times == sorted(times)


async def _reboot_in_outage(tmp: Path) -> dict[str, Any]:
    sp_pub = "tcp://127.0.0.1:%d" % free_port()
    sp_sub = "tcp://127.0.0.1:%d" % free_port()
    board = SimBoard("sim1", tmp, period_ms=PERIOD_MS, extra={"outbox_dir": "outbox"})
    board.start()
    exe = str(Path(sys.executable).parent / "pubmote")
    bridge_args = [exe, "bridge", "--no-view", "--serial", board.port, "--sp-pub", sp_pub,
                   "--sp-sub", sp_sub, "--allow-anonymous-boards"]

    async def start_bridge() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*bridge_args,
                                                    stderr=asyncio.subprocess.DEVNULL)

    bridge = await start_bridge()
    col = Collector(sp_pub, TOPIC)
    try:
        await col.wait_for(TOPIC, 10, timeout_s=60)
        bridge.send_signal(signal.SIGTERM)
        await bridge.wait()
        await asyncio.sleep(OUTAGE_S)  # the board takes its readings, the bridge away
        board.power_off()
        # what the cut left on the board's flash: the readings the second boot starts with
        # (read from a copy: replay removes the segments it finds done)
        shutil.copytree(tmp / "outbox", tmp / "outbox-at-cut")
        log = OutLog(str(tmp / "outbox-at-cut"))
        left = [cbor2.loads(f[1])["seq"] for f in log.replay()]
        board.start()
        await asyncio.sleep(OUTAGE_S)
        assert board.crashed() is None, board.crashed()
        bridge = await start_bridge()
        # the second boot took ~15 readings in the outage: all of them and a few fresh ones
        await wait_second_boot(col, int(OUTAGE_S * 1000 / PERIOD_MS) + 5)
    finally:
        col.close()
        if bridge.returncode is None:
            bridge.terminate()
            await bridge.wait()
        board.stop()
    boots, in_order = _boots(col.with_prefix(TOPIC))
    return {"boots": boots, "in_order": in_order, "left": left}


async def wait_second_boot(col: Collector, n2: int) -> None:
    async with asyncio.timeout(60):
        while True:
            boots = _boots(col.with_prefix(TOPIC))[0]
            if len(boots) >= 2 and len(boots[-1]) >= n2:
                return
            await asyncio.sleep(0.1)


@pytest.mark.timeout(180)
def test_readings_survive_a_power_cut_in_the_outage(tmp_path: Path) -> None:
    r = asyncio.run(_reboot_in_outage(tmp_path))
    assert len(r["boots"]) == 2 and r["in_order"], r
    boot1, boot2 = r["boots"]
    left = r["left"]
    # the first boot's readings: every one it took before the cut, the ones its log held
    # among them, in order (at most the one being written when the power went is missing)
    # (the collector may have missed the first ones: it dials the bridge as the board does)
    assert boot1 == list(range(boot1[0], boot1[0] + len(boot1))), r
    assert left and left == list(range(left[0], left[-1] + 1)), r
    assert boot1[-1] == left[-1], r
    assert len(left) >= 0.8 * OUTAGE_S * 1000 / PERIOD_MS, r
    # then the second boot's, from its first reading on
    assert boot2 == list(range(len(boot2))) and len(boot2) >= OUTAGE_S * 1000 / PERIOD_MS, r
