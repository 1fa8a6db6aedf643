"""`pubmote firmware build`: MicroPython firmware with pubmote frozen in."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pubmote.cli import file_kinds
from pubmote.cli.kinds import arg


def register(sub: Any) -> None:
    """Add `firmware` to the `pubmote` parser."""
    fw = sub.add_parser(
        "firmware", help="build MicroPython firmware with pubmote frozen in",
        description="Firmware images with pubmote compiled in (firmware/manifest.py).")
    fws = fw.add_subparsers(dest="fw_command", metavar="ACTION", required=True)
    fb = fws.add_parser(
        "build", help="build the firmware (cached: unchanged inputs build in seconds)",
        description="Build MicroPython's port for the board with pubmote_wire, pubmote_node "
                    "and a main.py that starts pubmote's app frozen in, and write "
                    "OUT/firmware.uf2 and OUT/firmware.bin. The MicroPython tree is "
                    "--micropython DIR, else $MICROPY_DIR, else ../shared/rp2040/"
                    "micropython-1.27.0-rp2-src.tar.xz beside this repository, unpacked "
                    "into build/firmware/. Builds are cached in build/firmware/cache/ by a "
                    "hash of every input (tree, manifest, frozen sources, toolchain).",
        epilog="Toolchain (Debian/Ubuntu): sudo apt-get install -y gcc-arm-none-eabi "
               "libnewlib-arm-none-eabi cmake build-essential. esp32 needs ESP-IDF "
               "(IDF_PATH set by its export.sh).")
    fb.add_argument("--board", default="pico", choices=("pico", "pico_w", "esp32"),
                    help="pico (RPI_PICO, default), pico_w (RPI_PICO_W), esp32 (ESP32_GENERIC)")
    fb.add_argument("--micropython", metavar="DIR", type=arg(file_kinds.micropython_tree),
                    help="a MicroPython source tree with its submodules (default: "
                         "$MICROPY_DIR, else the tarball in ../shared/rp2040/)")
    fb.add_argument("--out", metavar="DIR", type=arg(file_kinds.folder_out),
                    help="where firmware.uf2 and firmware.bin go (default build/firmware/BOARD, "
                         "with --app build/firmware/BOARD+APP)")
    fb.add_argument("--app", metavar="FILE", action="append", default=[],
                    type=arg(file_kinds.python_in),
                    help="a .py module of your app to freeze beside pubmote (repeatable): its "
                         "code then stays in flash instead of the board's heap; name it in "
                         "the board's config as app")
    fb.set_defaults(run=_firmware)


def _firmware(args: argparse.Namespace) -> int:
    from pubmote.boards.fwbuild import BuildError, OutputError, build

    try:
        build(args.board, micropython=args.micropython,
              out=Path(args.out) if args.out else None, apps=[Path(a) for a in args.app],
              progress=lambda line: print(line, flush=True))
    except OutputError as e:
        print("pubmote firmware build: --out %s" % e, file=sys.stderr)
        return 2
    except BuildError as e:
        print("pubmote firmware build: %s" % e, file=sys.stderr)
        return 1
    return 0
