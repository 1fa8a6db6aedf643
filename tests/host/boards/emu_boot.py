"""Boots of the emulated Pico for the tests of its writable flash (test_emu_flash.py,
test_emu_outlog.py): one boot that types a REPL line and returns what it printed, and a
boot whose power is cut once its writer has reported enough writes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from pubmote.boards.emu import runner_cmd

BUILD_WAIT_S = 900  # the cached firmware, or a build of it (minutes on a loaded machine)
BOOT_S = 120  # one boot to a REPL line's answer: about a second of CPU, generous on a busy box
# the marker is typed as 'DO'+'NE' so that the REPL's echo of the line does not hold it
DONE = "DONE"
WROTE = re.compile(r"^W (\d+)\r?$", re.M)  # a writer's "W <n>": its n-th write is done


def boot(tmp: Path, line: str, *, name: str, fs: Path | None = None,
         flash_in: Path | None = None, flash_out: Path | None = None) -> str:
    """One boot: `line` typed at the REPL, the USB output up to the DONE it prints."""
    usb = tmp / (name + ".usb")
    cmd = runner_cmd(fs, usb_log=usb, fast=True, exit_on=DONE, timeout_s=BOOT_S,
                     flash_in=flash_in, flash_out=flash_out, repl=line)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=BOOT_S + 30, check=False)
    out = usb.read_text(errors="replace") if usb.exists() else ""
    assert p.returncode == 0, (p.returncode, p.stderr, out)
    return out


def _last_write(text: str) -> int:
    return max([int(n) for n in WROTE.findall(text)] or [-1])


def cut_power_after(tmp: Path, fs: Path, chip: Path, line: str, writes: int) -> int:
    """Boot with `line` typed at the REPL (a loop printing "W <n>" after each write), cut
    the power (SIGKILL of the emulator) once it has reported `writes` writes, the chip
    saved to `chip`; the last write it reported done."""
    usb = tmp / "writer.usb"
    cmd = runner_cmd(fs, usb_log=usb, fast=True, timeout_s=BOOT_S, flash_out=chip, repl=line)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + BOOT_S
        done = -1
        while done < writes and time.monotonic() < deadline and p.poll() is None:
            done = _last_write(usb.read_text(errors="replace") if usb.exists() else "")
            time.sleep(0.05)
        assert done >= writes, (p.poll(), usb.read_text(errors="replace")[-2000:])
        os.kill(p.pid, signal.SIGKILL)  # the power cut, while the loop keeps writing
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    return _last_write(usb.read_text(errors="replace"))
