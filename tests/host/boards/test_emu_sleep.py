"""The emulated Pico deep-sleeps as a Pico does (docs/protocols/sleep.md): the rp2 port's
machine.deepsleep(ms) is a light sleep on the timer's alarm, which rp2040js runs, then a
reset through the watchdog, which ends the runner (pico.mjs) with status 75, the chip
saved, for the simulated board's supervisor to power it on again; a file written before
the sleep is on the chip the next boot starts from. Two emulator boots."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from emu_boot import BOOT_S, BUILD_WAIT_S, boot
from pubmote.boards.emu import runner_cmd
from pubmote.boards.sim import REBOOT_STATUS


@pytest.mark.timeout(BUILD_WAIT_S)
def test_deepsleep_sleeps_then_resets_with_status_75(built: None, tmp_path: Path) -> None:
    chip = tmp_path / "chip.flash"
    usb = tmp_path / "sleep.usb"
    line = ("import machine,time;f=open('/before.txt','w');f.write('x');f.close();"
            "print('SLEEP'+'ING');time.sleep_ms(300);machine.deepsleep(800);"
            "print('NOT '+'REACHED')")
    cmd = runner_cmd(None, usb_log=usb, timeout_s=BOOT_S, flash_out=chip, repl=line)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=BOOT_S + 30, check=False)
    out = usb.read_text(errors="replace")
    assert p.returncode == REBOOT_STATUS, (p.returncode, p.stderr, out)
    # (typed split, so that the REPL's echo of the line holds neither)
    assert "SLEEPING" in out and "NOT REACHED" not in out, out
    # the next power-on boots what the chip held when the board went to sleep
    out = boot(tmp_path, "import os;print('LS','before.txt' in os.listdir('/'),'DO'+'NE')",
               name="woken", flash_in=chip, flash_out=chip)
    assert "LS True DONE" in out, out
