"""The durable outbox's log on the emulated Pico (the real rp2 firmware, pubmote frozen in,
its flash chip writable: flashchip.mjs): messages appended on one boot are replayed on the
next from the saved chip image, those that left not; a power cut (SIGKILL of the emulator)
in the middle of appends loses at most the record being written. Three emulator boots."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pubmote.boards import fwbuild
from pubmote.boards.emu import make_fs_image, runner_cmd

BUILD_WAIT_S = 900  # the cached firmware, or a build of it (minutes on a loaded machine)
BOOT_S = 120
# the marker is typed as 'DO'+'NE' so that the REPL's echo of the line does not hold it
DONE = "DONE"

REPLAY = ("from pubmote_node.outlog import OutLog;l=OutLog('/outbox');"
          "print('GOT',[int(f[1]) for f in l.replay()],'DO'+'NE')")


@pytest.fixture(scope="module")
def built() -> None:
    fwbuild.build("pico", progress=lambda line: None)


def boot(tmp: Path, line: str, *, name: str, fs: Path | None = None,
         flash_in: Path | None = None, flash_out: Path | None = None) -> str:
    """One boot: `line` typed at the REPL, the USB output up to the DONE it prints."""
    usb = tmp / (name + ".usb")
    cmd = runner_cmd(fs, usb_log=usb, fast=True, exit_on=DONE, timeout_s=BOOT_S,
                     flash_in=flash_in, flash_out=flash_out, repl=line)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=BOOT_S + 30)
    out = usb.read_text(errors="replace") if usb.exists() else ""
    assert p.returncode == 0, (p.returncode, p.stderr, out)
    return out


def got(out: str) -> list[int]:
    m = re.search(r"GOT \[([\d, ]*)\] DONE", out)
    assert m, out
    return [int(x) for x in m.group(1).split(",") if x.strip()]


@pytest.mark.timeout(BUILD_WAIT_S)
def test_the_log_survives_a_reboot(built: None, tmp_path: Path) -> None:
    chip = tmp_path / "chip.flash"
    out = boot(tmp_path, "from pubmote_node.outlog import OutLog;l=OutLog('/outbox');"
               "print('FIRST',l.replay());[l.append((b'/t',b'%d'%i)) for i in range(40)];"
               "[l.done() for i in range(5)];l.append((b'/t',b'40'));"
               "import os;print('SEGS',len(os.listdir('/outbox')),'DO'+'NE')",
               name="first", flash_out=chip)
    assert "FIRST []" in out, out
    m = re.search(r"SEGS (\d+) DONE", out)
    assert m and int(m.group(1)) >= 2, out  # 41 records of ~25 bytes: more than a segment
    # the next boot, from the chip as the first left it: the 36 that had not left
    out = boot(tmp_path, REPLAY, name="second", flash_in=chip, flash_out=chip)
    assert got(out) == list(range(5, 41)), out


WRITER = b"""\
from pubmote_node.outlog import OutLog
l = OutLog('/outbox')
l.replay()
i = 0
while True:
    l.append((b'/pubmote/demo/pico1/temperature', b'%d' % i + b'x' * 40))
    print('W', i)
    i += 1
"""

CUT_AFTER = 30  # appends the board reports done before the power is cut


@pytest.mark.timeout(BUILD_WAIT_S)
def test_a_power_cut_mid_append_loses_at_most_that_record(built: None,
                                                          tmp_path: Path) -> None:
    chip = tmp_path / "chip.flash"
    fs = make_fs_image({"/w.py": WRITER}, tmp_path / "fs.lfs")
    usb = tmp_path / "writer.usb"
    cmd = runner_cmd(fs, usb_log=usb, fast=True, timeout_s=BOOT_S, flash_out=chip,
                     repl="exec(open('/w.py').read())")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + BOOT_S
        done = -1
        while done < CUT_AFTER and time.monotonic() < deadline and p.poll() is None:
            text = usb.read_text(errors="replace") if usb.exists() else ""
            done = max([int(n) for n in re.findall(r"^W (\d+)\r?$", text, re.M)] or [-1])
            time.sleep(0.05)
        assert done >= CUT_AFTER, (p.poll(), usb.read_text(errors="replace")[-2000:])
        os.kill(p.pid, signal.SIGKILL)  # the power cut, while the loop keeps appending
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    text = usb.read_text(errors="replace")
    done = max(int(n) for n in re.findall(r"^W (\d+)\r?$", text, re.M))
    out = boot(tmp_path, REPLAY.replace("int(f[1])", "int(f[1][:-40])"), name="after",
               flash_in=chip, flash_out=chip)
    seqs = got(out)
    # every append the board finished (and said so), in order; then at most the one it was
    # writing when the power went (finished or not: its record whole or skipped)
    assert seqs == list(range(len(seqs))), out
    assert len(seqs) >= done + 1, (done, out)
