"""The durable outbox on the emulated Pico (the real rp2 firmware, pubmote frozen in, its
flash chip emulated by flashchip.mjs, which counts what the firmware erases and programs):
flash writes per message of the outbox's log (outlog.py) against a boot that writes none,
for a connected board (each message acked before the next), an outage (64 held, the oldest
dropped beyond) and, for comparison, one log file appended to (open/write/close, 45-byte
records); then the heap bench/firmware/outbox_heap.py measures on the board (the outbox in
RAM and durable, empty and holding 64 readings).

    python bench/firmware/outbox_pico.py [--n 200]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "host"))
from pubmote.boards import fwbuild  # noqa: E402
from pubmote.boards.emu import make_fs_image, runner_cmd  # noqa: E402

BOOT_S = 600
FLASH = re.compile(r"flash: (\d+) sectors erased, (\d+) pages programmed")
REC = b"/pubmote/demo/pico1/temperature"
SCENARIOS = {
    "connected": "for i in range(N):\n l.append((T, b'%05d' % i + b'x' * 40))\n l.done()\n",
    "outage": ("for i in range(N):\n if i >= 64:\n  l.done()\n"
               " l.append((T, b'%05d' % i + b'x' * 40))\n"),
    "one_file": ("for i in range(N):\n f = open('/one.log', 'ab')\n"
                 " f.write(T + b'%05d' % i + b'x' * 40)\n f.close()\n"),
}


def boot(tmp: Path, files: dict[str, bytes], line: str) -> tuple[str, tuple[int, int]]:
    """One boot from an erased chip: its USB output and (sectors erased, pages programmed)."""
    usb = tmp / "usb.log"
    usb.unlink(missing_ok=True)
    fs = make_fs_image(files, tmp / "fs.lfs")
    cmd = runner_cmd(fs, usb_log=usb, fast=True, exit_on="DONE", timeout_s=BOOT_S, repl=line)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=BOOT_S + 30, env=dict(os.environ, PUBMOTE_EMU_DEBUG="1"))
    out = usb.read_text(errors="replace") if usb.exists() else ""
    m = FLASH.search(p.stderr)
    if p.returncode != 0 or not m or "DONE" not in out.replace("'DO'+'NE'", ""):
        sys.exit("boot failed (%d): %s\n%s" % (p.returncode, p.stderr[-2000:], out[-2000:]))
    return out, (int(m.group(1)), int(m.group(2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="messages per scenario (default 200)")
    args = ap.parse_args()
    fwbuild.build("pico", progress=lambda line: None)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        head = ("from pubmote_node.outlog import OutLog\nl = OutLog('/outbox')\nl.replay()\n"
                "T = %r\nN = %d\n" % (REC, args.n))
        _, base = boot(tmp, {"/s.py": head.encode()}, "exec(open('/s.py').read());"
                       "print('DO'+'NE')")
        print("BENCH outbox_pico.base_erases %d" % base[0])
        for name, body in SCENARIOS.items():
            _, (erases, pages) = boot(tmp, {"/s.py": (head + body).encode()},
                                      "exec(open('/s.py').read());print('DO'+'NE')")
            print("BENCH outbox_pico.%s.erases_per_msg %.3f"
                  % (name, (erases - base[0]) / args.n))
            print("BENCH outbox_pico.%s.pages_per_msg %.3f" % (name, (pages - base[1]) / args.n))
        heap = (ROOT / "bench" / "firmware" / "outbox_heap.py").read_bytes()
        out, _ = boot(tmp, {"/h.py": heap}, "DIR='/obh';exec(open('/h.py').read());"
                      "print('DO'+'NE')")
        for k, v in re.findall(r"^BENCH (\S+) (-?\d+)", out, re.M):
            print("BENCH pico.%s %s" % (k, v))


if __name__ == "__main__":
    main()
