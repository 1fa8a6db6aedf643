"""`pubmote simdev`: one simulated board to deploy to with mpremote (its REPL on a pty)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pubmote.cli import file_kinds
from pubmote.cli.common import run_until_interrupted
from pubmote.cli.kinds import arg


def register(sub: Any) -> None:
    """Add `simdev` to the `pubmote` parser."""
    sd = sub.add_parser(
        "simdev", help="a simulated board to flash-free deploy to (mpremote over a pty)",
        description="Run a simulated board in DIR: DIR/repl is its REPL (mpremote, every "
                    "command prefixed with resume), DIR/tty its line to the bridge "
                    "(`pubmote bridge --serial DIR/tty`), DIR/flash its filesystem. A soft "
                    "reset (what `pubmote deploy` ends with) reboots it into main.py.")
    sd.add_argument("--dir", required=True, metavar="DIR", type=arg(file_kinds.folder_out))
    sd.set_defaults(run=_run)


async def _simdev(args: argparse.Namespace) -> None:
    from pubmote.boards.simdev import SimDevice

    dev = SimDevice(Path(args.dir))
    dev.start()
    print("repl %s" % dev.repl_port, flush=True)
    print("tty %s" % dev.cable.bridge_link, flush=True)
    try:
        await dev.supervise()
    finally:
        dev.stop()


def _run(args: argparse.Namespace) -> int:
    return run_until_interrupted(lambda: _simdev(args))
