"""The durable outbox's log on the emulated Pico (the real rp2 firmware, pubmote frozen in,
its flash chip writable: flashchip.mjs): messages appended on one boot are replayed on the
next from the saved chip image, those that left not; a power cut (SIGKILL of the emulator)
in the middle of appends loses at most the record being written. Three emulator boots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from emu_boot import BUILD_WAIT_S, boot, cut_power_after
from pubmote.boards.emu import make_fs_image

REPLAY = ("from pubmote_node.outlog import OutLog;l=OutLog('/outbox');"
          "print('GOT',[int(f[1]) for f in l.replay()],'DO'+'NE')")


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
    done = cut_power_after(tmp_path, fs, chip, "exec(open('/w.py').read())", CUT_AFTER)
    out = boot(tmp_path, REPLAY.replace("int(f[1])", "int(f[1][:-40])"), name="after",
               flash_in=chip, flash_out=chip)
    seqs = got(out)
    # every append the board finished (and said so), in order; then at most the one it was
    # writing when the power went (finished or not: its record whole or skipped)
    assert seqs == list(range(len(seqs))), out
    assert len(seqs) >= done + 1, (done, out)
