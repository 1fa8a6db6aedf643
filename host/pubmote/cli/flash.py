"""`pubmote flash`: put MicroPython on a board (esptool, or a UF2 copy)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg


def register(sub: Any) -> None:
    """Add `flash` to the `pubmote` parser."""
    f = sub.add_parser(
        "flash", help="put MicroPython on a board (esptool for ESP32, UF2 for RP2040)",
        description="Flash MicroPython firmware. ESP32 family: esptool with the chip and "
                    "offset of the board profile (ESP32 0x1000; S3/C3/C6 0x0). RP2040: the "
                    "UF2 is copied to the RPI-RP2 BOOTSEL drive (the board is put into its "
                    "bootloader with mpremote first if --port is given).")
    f.add_argument("--board", required=True, type=arg(kinds.flash_board),
                   help="board type: esp32, rp2040, or pico / pico_w (an RP2040 with the "
                        "firmware `pubmote firmware build` made)")
    f.add_argument("--port", type=arg(kinds.serial_port), help="serial port (required for ESP32)")
    f.add_argument("--firmware", metavar="FILE", type=arg(file_kinds.file_in),
                   help=".bin (ESP32) or .uf2; for pico / pico_w the default is "
                        "build/firmware/BOARD/firmware.uf2 from `pubmote firmware build`")
    f.add_argument("--erase", action="store_true", help="erase the whole flash first")
    f.add_argument("--chip", type=arg(kinds.chip),
                   help="ESP32 variant: esp32 (default), esp32s3, esp32c3, esp32c6")
    f.add_argument("--connect-attempts", type=arg(kinds.whole(1)), metavar="N",
                   help="how often esptool tries to reach the bootloader (esptool's default 7)")
    f.set_defaults(run=_flash)


def _flash(args: argparse.Namespace) -> int:
    from pubmote.boards.flash import FlashError, FlashUsageError, flash

    board, firmware = args.board, args.firmware
    if board in ("pico", "pico_w"):
        from pubmote.boards.fwbuild import CACHE

        if firmware is None:
            firmware = str(CACHE / board / "firmware.uf2")
            if not Path(firmware).is_file():
                print("pubmote flash: no %s: run `pubmote firmware build --board %s` first "
                      "(or pass --firmware FILE)" % (firmware, board), file=sys.stderr)
                return 1
        board = "rp2040"
    if firmware is None:
        print("pubmote flash: --firmware FILE is required for board %s" % board,
              file=sys.stderr)
        return 2
    try:
        flash(board, args.port, firmware, erase=args.erase, chip=args.chip,
              connect_attempts=args.connect_attempts)
    except (FlashUsageError, ValueError) as e:  # ValueError: an unknown board
        print("pubmote flash: %s" % e, file=sys.stderr)
        return 2
    except FlashError as e:
        print("pubmote flash: %s" % e, file=sys.stderr)
        return 1
    return 0
