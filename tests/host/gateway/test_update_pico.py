"""`pubmote update` on emulated Picos (the real rp2 firmware, pubmote frozen in, rp2040js;
UART0 at 115200 baud on a pty to the bridge; the flash chip kept in a file across resets,
as `pubmote bridge --sim-kind pico` runs them): a good app ends healthy and runs; one that
raises at import (a canary: the other board is skipped) and one that never registers roll
back by themselves, the board back on the good app; a power cut mid-transfer leaves the
board booting a whole app, and the update, called again, ends healthy. A board's
machine.reset() ends its emulator with status 75 and the fleet starts it again from its
flash image (pico.mjs). Two bridge runs (two boards, then one): a few minutes of emulator,
the apps kept small."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_update import GOOD, Topics, final_states, update

from e2e import APPS, boards_registered, bridge_with_boards, wait_until

BROKEN = APPS / "update_broken"
HANG = APPS / "update_hang"
BOOT_S = 300  # an emulated Pico's boot to its registration, on a loaded machine


@pytest.mark.timeout(1500)  # a firmware build on a loaded machine, then three updates
def test_update_canary_and_both_rollbacks_on_an_emulated_pico(built: None, tmp_path: Path) -> None:
    async def run() -> None:
        async with bridge_with_boards(tmp_path, 2, sim_keys=True, sim_kind="pico") as bridge:
            await boards_registered(bridge, ["sim1", "sim2"], BOOT_S)
            topics = Topics(bridge)
            code, out, err = await update("--app", str(GOOD), "--config", 'version="v2"',
                                          "--timeout", "120", "sim1")
            assert code == 0, out + err
            assert final_states(out) == {"sim1": "healthy"}, out
            # the board reports its updater's heap and the transfer on its own clock
            assert "(updater heap +" in out and " ms)" in out, out
            await wait_until(lambda: topics.has(b"/test/sim1/version", b"v2"), 120,
                             "the new app's publish")
            # the broken app as a canary: sim1 rolls back, sim2 is never touched
            code, out, _ = await update("--app", str(BROKEN), "--timeout", "120",
                                        "--canary", "1", "sim1", "sim2")
            assert code == 1
            assert final_states(out) == {"sim1": "rolledback", "sim2": "skipped"}, out
            assert "ValueError: broken app: raises at import" in out
            assert "canary sim1 not healthy" in out
            code, out, _ = await update("--app", str(HANG), "--timeout", "5", "sim1")
            assert code == 1
            assert final_states(out) == {"sim1": "rolledback"}, out
            assert "not healthy within 5s (never registered)" in out, out
            topics = Topics(bridge)  # back on the app the good update left, running
            await wait_until(lambda: topics.has(b"/test/sim1/version", b"v2"), 120,
                             "the good app again")

    asyncio.run(run())


@pytest.mark.timeout(1500)
def test_a_power_cut_mid_transfer_on_an_emulated_pico(built: None, tmp_path: Path) -> None:
    # a ~9 kB app (12 segments); the power is cut (SIGKILL of the emulator) with a third of
    # it fetched; powered again from its flash image, the board boots and registers (on its
    # demo app: what the cut left half-written is not an app), and the roll-out, calling
    # it again, ends with the new app healthy
    app = tmp_path / "app"
    app.mkdir()
    (app / "app.py").write_bytes((GOOD / "app.py").read_bytes())
    (app / "pad.py").write_text("DATA = %r\n" % ("x" * 8500))

    async def run() -> None:
        async with bridge_with_boards(tmp_path / "sim", 1, sim_keys=True,
                                      sim_kind="pico") as bridge:
            await boards_registered(bridge, ["sim1"], BOOT_S)
            topics = Topics(bridge)
            job = asyncio.create_task(update("--app", str(app), "--timeout", "120", "sim1"))
            assert bridge.control is not None
            ups = bridge.control.producer.updates
            await wait_until(lambda: "sim1" in ups and ups["sim1"].bytes
                             >= ups["sim1"].total // 3, 240, "a third of the transfer")
            board = bridge.fleet.boards[0]  # type: ignore[union-attr]
            assert ups["sim1"].state == "fetching"
            before = bridge.hub.boards["sim1"].boot
            board.power_off()
            board.start()
            await wait_until(lambda: bridge.hub.boards["sim1"].boot != before, BOOT_S,
                             "sim1 to register after the cut")
            code, out, err = await job
            assert code == 0, out + err
            assert final_states(out) == {"sim1": "healthy"}, out
            await wait_until(lambda: topics.has(b"/test/sim1/version", b"good"), 120,
                             "the new app's publish")

    asyncio.run(run())
