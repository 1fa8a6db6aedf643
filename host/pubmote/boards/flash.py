"""`pubmote flash`: put MicroPython on a board. ESP32 family through esptool (chip and
offset from the profile), RP2040 by copying the UF2 to its BOOTSEL drive."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pubmote.boards.profiles import load_profile

# ESP32 keeps its bootloader at 0x1000; the newer chips at 0x0
OFFSETS = {"esp32": "0x1000", "esp32s2": "0x1000", "esp32s3": "0x0", "esp32c3": "0x0",
           "esp32c6": "0x0"}
UF2_DRIVE_GLOBS = ("/media/*/RPI-RP2", "/run/media/*/RPI-RP2", "/media/RPI-RP2",
                   "/mnt/RPI-RP2")
# what esptool says -> one line a user can act on
HINTS = (
    ("Permission denied", "permission denied on the port: add yourself to the dialout group "
                          "(sudo usermod -aG dialout $USER, then log in again)"),
    ("Resource busy", "the port is busy: close the program using it (screen, minicom, "
                      "mpremote, a running `pubmote bridge`)"),
    ("could not open port", "no such port: check the cable; `mpremote devs` lists ports"),
    ("Wrong --chip", "wrong chip: the board is not a %(chip)s; pass --chip (esp32, "
                     "esp32s3, esp32c3, esp32c6)"),
    ("This chip is", "wrong chip: the board is not a %(chip)s; pass --chip (esp32, "
                     "esp32s3, esp32c3, esp32c6)"),
    ("Failed to connect", "the board did not answer: hold BOOT, press and release RESET, "
                          "release BOOT, then try again"),
)


class FlashError(Exception):
    """A flash step failed; the message is one line with a hint."""


class FlashUsageError(FlashError):
    """The command was wrong (no such port, not a serial port, wrong file): exit status 2."""


def check_port(port: str) -> None:
    """A FlashUsageError unless `port` exists and is a serial line."""
    from pubmote.core.addresses import AddressError, check_serial

    if not os.path.exists(port):
        raise FlashUsageError("--port %s: no such port: check the cable; `mpremote devs` "
                              "lists serial ports" % port)
    try:
        check_serial(port)
    except AddressError as e:
        raise FlashUsageError(str(e).replace("--serial", "--port", 1)) from None


def flash(board: str, port: str | None, firmware: str, *, erase: bool = False,
          chip: str | None = None, connect_attempts: int | None = None,
          progress: Callable[[str], None] = print) -> None:
    profile = load_profile(board)
    if not os.path.isfile(firmware):
        raise FlashUsageError("no firmware file %s (download it from %s)"
                         % (firmware, profile["flash"].get("firmware", "micropython.org")))
    tool = profile["flash"]["tool"]
    if tool == "esptool":
        _flash_esp(port, firmware, chip or profile["flash"]["chip"], erase, connect_attempts,
                   progress)
    elif tool == "uf2":
        _flash_uf2(port, firmware, progress)
    else:
        raise FlashError("board %s has nothing to flash (%s)" % (board, profile["description"]))


def _flash_esp(port: str | None, firmware: str, chip: str, erase: bool,
               connect_attempts: int | None, progress: Callable[[str], None]) -> None:
    if not port:
        raise FlashUsageError("--port is required for ESP32 boards (`mpremote devs` lists "
                              "ports)")
    check_port(port)
    if chip not in OFFSETS:
        raise FlashUsageError("unknown chip %s (known: %s)" % (chip, ", ".join(OFFSETS)))
    base = [str(Path(sys.executable).parent / "esptool"), "--chip", chip, "--port", port]
    if connect_attempts is not None:
        base += ["--connect-attempts", str(connect_attempts)]
    steps = []
    if erase:
        steps.append([*base, "erase-flash"])
    steps.append([*base, "--baud", "460800", "write-flash", "-z", OFFSETS[chip], firmware])
    for cmd in steps:
        progress("$ " + " ".join(cmd[1:]))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:  # esptool prints its own progress; pass it on
            lines.append(line.rstrip())
            progress(line.rstrip())
        if proc.wait() != 0:
            text = "\n".join(lines)
            for needle, hint in HINTS:
                if needle in text:
                    raise FlashError(hint % {"chip": chip})
            said = [x.strip() for x in lines if x.strip()]
            errors = [x for x in said if "error" in x.lower()]
            raise FlashError("esptool failed: %s" % ((errors or said or ["no output"])[-1]))


def find_uf2_drive() -> Path | None:
    """The RP2040's BOOTSEL drive: PUBMOTE_UF2_DRIVE, else the usual mount points."""
    env = os.environ.get("PUBMOTE_UF2_DRIVE")
    candidates = [env] if env else [p for g in UF2_DRIVE_GLOBS for p in glob.glob(g)]
    for c in candidates:
        if c and (Path(c) / "INFO_UF2.TXT").is_file():
            return Path(c)
    return None


def _flash_uf2(port: str | None, firmware: str, progress: Callable[[str], None]) -> None:
    if not firmware.endswith(".uf2"):
        raise FlashUsageError("RP2040 boards take a .uf2 file, not %s" % firmware)
    drive = find_uf2_drive()
    if drive is None and port:
        check_port(port)
    if drive is None and port:
        progress("asking the board on %s to enter its bootloader (mpremote bootloader)" % port)
        subprocess.run([str(Path(sys.executable).parent / "mpremote"), "connect", port,
                        "bootloader"], capture_output=True, timeout=30, check=False)
        deadline = time.monotonic() + 15
        while drive is None and time.monotonic() < deadline:
            time.sleep(0.5)
            drive = find_uf2_drive()
    if drive is None and shutil.which("picotool"):
        # no drive mounted (a headless gateway): picotool talks to the BOOTSEL bootloader, or
        # to a running board it can reboot (-f), over USB itself
        progress("no RPI-RP2 drive mounted: loading %s with picotool" % firmware)
        p = subprocess.run(["picotool", "load", "-x", "-f", firmware], capture_output=True,
                           text=True, timeout=120, check=False)
        if p.returncode != 0:
            last = (p.stderr or p.stdout).strip().splitlines()
            raise FlashError("picotool failed: %s" % (last[-1] if last else "no output"))
        progress("done: the board runs the new firmware")
        return
    if drive is None:
        raise FlashError("no RPI-RP2 drive found: hold BOOTSEL while plugging the board in "
                         "(or set PUBMOTE_UF2_DRIVE to where it is mounted, or install "
                         "picotool)")
    size = os.path.getsize(firmware)
    progress("copying %s (%d kB) to %s" % (firmware, size // 1024, drive))
    done = 0
    with open(firmware, "rb") as src, open(drive / Path(firmware).name, "wb") as dst:
        while chunk := src.read(64 * 1024):
            dst.write(chunk)
            done += len(chunk)
            progress("  %3d%%" % (100 * done // size))
        dst.flush()
        os.fsync(dst.fileno())
    progress("done: the board reboots into MicroPython by itself")
