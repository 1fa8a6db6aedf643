"""The emulated Pico's flash is writable (pico.mjs with flashchip.mjs): MicroPython's own
mkfs works, a file written with open()/write() is there after a reboot from the saved chip
image, and a power cut (SIGKILL of the runner) in the middle of writes leaves a filesystem
that mounts, with every write the firmware finished. Four emulator boots in all."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from emu_boot import BUILD_WAIT_S, boot, cut_power_after
from pubmote.boards.emu import make_fs_image, runner_cmd


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
    done = cut_power_after(tmp_path, fs, chip, "exec(open('/w.py').read())", CUT_AFTER)
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
