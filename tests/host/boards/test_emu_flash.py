"""The emulated Pico's flash is writable (pico.mjs with flashchip.mjs): MicroPython's own
mkfs works, a file written with open()/write() is there after a reboot from the saved chip
image, and a power cut (SIGKILL of the runner) in the middle of writes leaves a filesystem
that mounts, with every write the firmware finished. Four emulator boots in all."""

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

# waits for the cached firmware, or builds it (minutes on a loaded machine)
BUILD_WAIT_S = 900
BOOT_S = 120  # one boot to a REPL line's answer: about a second of CPU, generous on a busy box
# the marker is typed as 'DO'+'NE' so that the REPL's echo of the line does not hold it
DONE = "DONE"


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


@pytest.mark.timeout(BUILD_WAIT_S)
def test_mkfs_and_a_file_that_survives_a_reboot(built: None, tmp_path: Path) -> None:
    chip = tmp_path / "chip.flash"
    # an erased chip: _boot.py's own mkfs makes the filesystem old.txt is written to, and an
    # explicit mkfs must then wipe it
    out = boot(tmp_path, "import vfs,rp2,os;open('/old.txt','w').write('x');vfs.umount('/');"
               "vfs.VfsLfs2.mkfs(rp2.Flash(),progsize=256);"
               "vfs.mount(vfs.VfsLfs2(rp2.Flash(),progsize=256),'/');"
               "f=open('/a.txt','w');f.write('kept '*300);f.close();"
               "print('LS',os.listdir('/'),'DO'+'NE')", name="first", flash_out=chip)
    assert "LS ['a.txt'] DONE" in out, out
    assert chip.stat().st_size == 2 * 1024 * 1024
    # boots what the chip holds: no --firmware, no --fs
    out = boot(tmp_path, "import os;print('LS',os.listdir('/'),"
               "open('/a.txt').read()=='kept '*300,'DO'+'NE')", name="second",
               flash_in=chip, flash_out=chip)
    assert "LS ['a.txt'] True DONE" in out, out


WRITER = b"""\
import os
i = 0
while True:
    f = open('/log.txt', 'a')
    f.write('rec%05d ' % i + 'x' * 90 + '\\n')
    f.close()
    f = open('/state.txt', 'w')
    f.write(str(i))
    f.close()
    print('W', i)
    i += 1
"""

CHECKER = b"""\
import os
recs = open('/log.txt').read().split('\\n')
ok = recs[-1] == ''
n = len(recs) - 1
for i in range(n):
    ok = ok and recs[i] == 'rec%05d ' % i + 'x' * 90
state = int(open('/state.txt').read())
ok = ok and state in (n - 1, n - 2)
f = open('/log.txt', 'a')
f.write('after\\n')
f.close()
ok = ok and open('/log.txt').read().endswith('x\\nafter\\n')
print('CHECK', n, state, ok, open('/keep.txt').read() == 'K' * 5000, 'DO' + 'NE')
"""

CUT_AFTER = 40  # writes the board reports done before the power is cut


@pytest.mark.timeout(BUILD_WAIT_S)
def test_power_cut_mid_write_leaves_a_mountable_filesystem(built: None,
                                                           tmp_path: Path) -> None:
    chip = tmp_path / "chip.flash"
    fs = make_fs_image({"/w.py": WRITER, "/check.py": CHECKER, "/keep.txt": b"K" * 5000},
                       tmp_path / "fs.lfs")
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
        os.kill(p.pid, signal.SIGKILL)  # the power cut, while the loop keeps writing
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    text = usb.read_text(errors="replace")
    done = max(int(n) for n in re.findall(r"^W (\d+)\r?$", text, re.M))
    out = boot(tmp_path, "exec(open('/check.py').read())", name="after",
               flash_in=chip, flash_out=chip)
    m = re.search(r"CHECK (\d+) (-?\d+) (\w+) (\w+) DONE", out)
    assert m, out
    n = int(m.group(1))
    # every record the board finished (and said so) is there, in order, then at most the
    # ones it was writing when the power went
    assert n >= done + 1, (n, done, out)
    assert m.group(3) == "True" and m.group(4) == "True", out


def test_a_missing_chip_image_is_a_usage_error(tmp_path: Path) -> None:
    cmd = runner_cmd(None, flash_in=tmp_path / "none.flash", flash_out=tmp_path / "out.flash")
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "none.flash" in p.stderr, p.stderr
    assert not (tmp_path / "out.flash").exists()  # nothing written for a run that never began
