"""Emulated Raspberry Pi Picos: the real MicroPython rp2 firmware (`pubmote firmware build`)
running in rp2040js (pico.mjs under node), one process per board.

A board's UART0 is its link to the bridge, as on a real board: the runner's stdin/stdout sit
on the board end of a pty "cable" (cable.Cable), whose other end the bridge opens with
pyserial. Its configuration reaches it in a littlefs image built here (littlefs-python),
placed in the flash where MicroPython's filesystem lives, holding /pubmote_config.json;
pubmote itself is frozen in the firmware. The firmware can write its flash (flashchip.mjs):
the whole chip is kept in NAME.flash, so a reset (a power cycle) boots from what the board
last wrote, as a real board does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from pubmote.boards import files
from pubmote.boards.cable import Cable, detach_child
from pubmote.boards.fwbuild import BOOTROM, CACHE
from pubmote.boards.sim import SimBoard, last_error, last_line, read_tail

RUNNER = files.pico_runner()
# RPI_PICO: 2 MiB flash, MicroPython's littlefs in its last 1408 KiB (mpconfigboard.h),
# 4 KiB erase blocks, 256-byte programming (ports/rp2/modules/_boot.py)
FLASH_BYTES = 2 * 1024 * 1024
FS_BYTES = 1408 * 1024
FS_OFFSET = FLASH_BYTES - FS_BYTES
FS_BLOCK = 4096
LFS2_DISK_VERSION = 0x00020001  # the littlefs MicroPython 1.27 carries (lib/littlefs)
UART_BAUD = 115200
# MicroPython's REPL banner: the rp2 port prints it only once main.py has ended, so on a
# board whose main.py runs the app it means the app returned or raised
REPL_BANNER = re.compile(r"^MicroPython v\d", re.M)


def node_exe() -> str:
    exe = shutil.which("node")
    if exe is None:
        raise FileNotFoundError("node not found: install Node.js 20 (apt-get install nodejs)")
    # rp2040js comes from npm, into a checkout's node_modules (where node finds it from
    # pico.mjs); an installed pubmote has no emulated Picos
    root = files.checkout()
    if root is None or not (root / "node_modules" / "rp2040js").is_dir():
        raise FileNotFoundError("rp2040js not installed: run `make setup` (npm ci) in a "
                                "pubmote checkout")
    return exe


def firmware_bin(path: Path | None = None) -> Path:
    """The firmware the emulated Pico runs: `path`, else the cached `pubmote firmware build`
    output; FileNotFoundError says how to make it."""
    fw = path or (CACHE / "pico" / "firmware.bin")
    if not fw.is_file():
        raise FileNotFoundError("no %s: run `pubmote firmware build --board pico` (make "
                                "firmware) first" % fw)
    boot_rom()
    return fw


def boot_rom() -> Path:
    """The RP2040 boot ROM the emulator runs; FileNotFoundError says where it should be."""
    if not BOOTROM.is_file():
        raise FileNotFoundError("no RP2040 boot ROM at %s (../shared/rp2040/ beside the "
                                "repository)" % BOOTROM)
    return BOOTROM


def make_fs_image(files: dict[str, bytes], dest: Path) -> Path:
    """A littlefs image of MicroPython's rp2 filesystem holding `files` ({"/a/b.py": data});
    folders are made as needed. Written to dest, which is returned."""
    from littlefs import LittleFS

    fs = LittleFS(block_size=FS_BLOCK, block_count=FS_BYTES // FS_BLOCK, read_size=32,
                  prog_size=256, lookahead_size=32, disk_version=LFS2_DISK_VERSION)
    made: set[str] = set()
    for path in sorted(files):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in made:
                fs.mkdir(d)
                made.add(d)
        with fs.open("/".join(parts), "wb") as f:
            f.write(files[path])
    # only the blocks up to the last one in use: the rest of the flash stays erased (0xff)
    data = bytes(fs.context.buffer)
    used = len(data.rstrip(b"\xff"))
    used = (used + FS_BLOCK - 1) // FS_BLOCK * FS_BLOCK
    dest.write_bytes(data[:used])
    return dest


def app_ended(usb_log: Path, since: int = 0) -> str | None:
    """Why the app of an emulated Pico ended, read from its USB output written after byte
    `since`: the last line before the REPL banner (a traceback ends with the error), or
    that it ended with nothing said; None while the banner has not appeared."""
    text = read_tail(usb_log, since)
    if text is None:
        return None
    banners = list(REPL_BANNER.finditer(text))
    if not banners:
        return None
    # MicroPython drops what it prints before USB is up: the error may be gone
    return last_line(text[: banners[-1].start()]) or "the app ended (the board is at its REPL)"


def runner_cmd(fs_image: Path | None, *, usb_log: Path | None = None, fast: bool = False,
               exit_on: str | None = None, timeout_s: float = 0,
               firmware: Path | None = None, flash_in: Path | None = None,
               flash_out: Path | None = None, repl: str | None = None,
               overrun: bool = False, steady_clock: bool = False) -> list[str]:
    """The runner's command line. flash_in: a whole-chip image to start from (as flash_out
    writes it, every erase and program written through); with flash_in and no firmware,
    the board boots whatever firmware the image holds, else firmware (default: the cached
    build) is placed over it. repl: a line typed at the USB REPL's first prompt. overrun:
    the UART has no flow control (bytes arriving while the flash is busy are lost beyond
    the RX FIFO's room, as on a real Pico); else the line waits for the flash.
    steady_clock: an idle board's clock never jumps ahead to catch up with the wall clock
    (what the board times on its own clock then leaves out the host's slowness)."""
    cmd = [node_exe(), str(RUNNER), "--bootrom", str(boot_rom()), "--baud", str(UART_BAUD)]
    if flash_in is not None:
        cmd += ["--flash-in", str(flash_in)]
    if flash_in is None or firmware is not None:
        cmd += ["--firmware", str(firmware_bin(firmware))]
    if flash_out is not None:
        cmd += ["--flash-out", str(flash_out)]
    if repl is not None:
        cmd += ["--repl", repl]
    if fs_image is not None:
        cmd += ["--fs", str(fs_image), "--fs-offset", str(FS_OFFSET)]
    if usb_log is not None:
        cmd += ["--usb-log", str(usb_log)]
    if fast:
        cmd.append("--fast")
    if overrun:
        cmd.append("--overrun")
    if steady_clock:
        cmd.append("--steady-clock")
    if exit_on:
        cmd += ["--exit-on", exit_on]
    if timeout_s:
        cmd += ["--timeout-s", "%g" % timeout_s]
    return cmd


class PicoBoard(SimBoard):
    """One emulated Pico running the demo (or another frozen app) on its UART0 link; a
    SimBoard in every other respect (port, reset = power cycle, power_off = power cut,
    stop). Its flash chip is NAME.flash: written at its first start (the firmware, then a
    filesystem holding its config), then kept as the board writes it."""

    def __init__(self, name: str, workdir: Path, *, app: str = "demo", period_ms: int = 1000,
                 extra: dict[str, object] | None = None, app_dir: Path | None = None,
                 firmware: Path | None = None, **_unix_only: object) -> None:
        # no super().__init__: that one prepares a unix-port process
        self.name = name
        self.workdir = workdir.resolve()
        self.cable = Cable(self.workdir / (name + ".board"), self.workdir / (name + ".tty"))
        self.fs_path = self.workdir / (name + ".lfs")
        self.config_path = self.fs_path
        self.flash_path = self.workdir / (name + ".flash")
        self._flashed = False  # NAME.flash holds this board's chip (not a previous run's)
        self.log_path = self.workdir / (name + ".log")  # the board's USB CDC output
        # the profile's UART link: UART0 on GP0/GP1 (boards/rp2040.toml)
        self.config: dict[str, object] = {
            "name": name, "link": "uart", "uart": 0, "tx": 0, "rx": 1, "baud": UART_BAUD,
            "app": app, "period_ms": period_ms, "timeout_ms": 1000, "keepalive_ms": 2000}
        self.config.update(extra or {})
        self.app_dir = app_dir.resolve() if app_dir is not None else None
        # firmware.bin to run: the plain `pubmote firmware build` one unless given (one
        # with the app frozen in: fwbuild.build(apps=...))
        self.firmware = firmware
        # runner_cmd's overrun (the UART loses what arrives while the flash is busy) and
        # steady_clock; read at each start
        self.overrun = False
        self.steady_clock = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.emu_log_path = self.workdir / (name + ".emu.log")  # the runner's own errors
        self._log_start = 0  # where this power-on's USB output begins in log_path
        self._seen: tuple[int, str | None] = (-1, None)  # (log size, app_ended) last read

    def crashed(self) -> str | None:
        """Why the board is not running its app, else None: the emulator ended (its error,
        else its exit status), or the app ended and the board sits at its REPL (the last
        line it printed before the REPL's banner)."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            return (last_error(self.emu_log_path) or last_error(self.log_path)
                    or "the emulator exited with status %d" % self.proc.returncode)
        try:
            size = self.log_path.stat().st_size
        except OSError:
            return None
        if size != self._seen[0]:  # asked twice a second per board: read only what changed
            self._seen = (size, app_ended(self.log_path, self._log_start))
        return self._seen[1]

    def start(self) -> None:
        if not self.cable.plugged:
            self.cable.plug()
        try:  # the log is appended to across power cycles: what went before is not this run's
            self._log_start = self.log_path.stat().st_size
        except OSError:
            self._log_start = 0
        self._seen = (-1, None)
        if self._flashed:  # a power cycle: the chip as the board left it
            cmd = runner_cmd(None, usb_log=self.log_path, flash_in=self.flash_path,
                             flash_out=self.flash_path, overrun=self.overrun,
                             steady_clock=self.steady_clock)
        else:
            files = {"/pubmote_config.json": json.dumps(self.config).encode()}
            if self.app_dir is not None:  # --sim-app-dir: the app's modules go to /lib
                for f in sorted(self.app_dir.glob("*.py")):
                    files["/lib/" + f.name] = f.read_bytes()
            make_fs_image(files, self.fs_path)
            cmd = runner_cmd(self.fs_path, usb_log=self.log_path, firmware=self.firmware,
                             flash_out=self.flash_path, overrun=self.overrun,
                             steady_clock=self.steady_clock)
            self._flashed = True
        # the runner's stdin/stdout are the board end of the cable: its UART0 pins
        fd = os.open(self.cable.board_link, os.O_RDWR | os.O_NOCTTY)
        try:
            with open(self.emu_log_path, "ab") as err:
                self.proc = subprocess.Popen(
                    cmd, stdin=fd, stdout=fd, stderr=err, cwd=self.workdir,
                    preexec_fn=detach_child)  # noqa: PLW1509 - see detach_child
        finally:
            os.close(fd)
