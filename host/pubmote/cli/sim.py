"""`pubmote sim`: simulated boards on their own, for a bridge started separately."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.common import run_until_interrupted
from pubmote.cli.kinds import arg


def register(sub: Any) -> None:
    """Add `sim` to the `pubmote` parser."""
    s = sub.add_parser(
        "sim", help="run simulated boards on their own, for a bridge started separately",
        description="Start N simulated boards (sim1..simN) on ptys in DIR and keep them "
                    "running; a bridge opens DIR/simK.tty with --serial. Ctrl-C stops them.")
    s.add_argument("--boards", type=arg(kinds.whole(1, 64)), default=2, metavar="N",
                   help="how many (default 2)")
    s.add_argument("--dir", required=True, metavar="DIR", type=arg(file_kinds.folder_out),
                   help="where the ptys go")
    s.add_argument("--kind", choices=("unix", "pico"), default="unix",
                   help="unix (default: the MicroPython unix port) or pico (emulated Picos "
                        "running the firmware of `pubmote firmware build`)")
    s.add_argument("--period-ms", type=arg(kinds.whole(10, 86_400_000)), default=1000, metavar="MS",
                   help="demo publishing period (default 1000)")
    s.add_argument("--app", default="demo", metavar="MODULE", type=arg(kinds.module),
                   help="the board app to run: demo (default) or a module with "
                        "`async def main(node)` found in --app-dir")
    s.add_argument("--app-dir", metavar="DIR", type=arg(file_kinds.folder_in),
                   help="directory added to the boards' path")
    s.add_argument("--app-config", default="{}", metavar="JSON", type=arg(kinds.board_config),
                   help="extra keys for every board's config, as a JSON object")
    s.add_argument("--keys", action=argparse.BooleanOptionalAction, default=True,
                   help="give each board a key of its own, kept mode 0600 in DIR/keys.json: "
                        "start the bridge with --keys DIR/keys.json (default); --no-keys: "
                        "boards without a key (the bridge then needs "
                        "--allow-anonymous-boards)")
    s.set_defaults(run=_run)


async def _sim(args: argparse.Namespace) -> None:
    from pubmote.boards.fleet import SimFleet

    fleet = SimFleet(args.boards, Path(args.dir), kind=args.kind, period_ms=args.period_ms,
                     app=args.app,
                     app_dir=Path(args.app_dir) if args.app_dir else None,
                     extra=args.app_config, keyed=args.keys)
    if args.keys:
        print("keys %s" % (Path(args.dir) / "keys.json"), flush=True)
    fleet.start()
    try:
        for b in fleet.boards:
            print("%s %s" % (b.name, b.port), flush=True)
        while True:
            await asyncio.sleep(1)
            for b in fleet.boards:
                if b.rebooted():  # asked for by its firmware (an update, a rollback)
                    continue
                if not b.alive():
                    print("%s exited; see %s" % (b.name, b.log_path), file=sys.stderr)
                    b.start()
    finally:
        fleet.stop()


def _run(args: argparse.Namespace) -> int:
    from pubmote.cli.config_check import ConfigError, app_problem

    try:
        app_problem(args.app, args.app_dir, "--app", "--app-dir")
    except ConfigError as e:
        print("pubmote sim: %s" % e, file=sys.stderr)
        return 2
    return run_until_interrupted(lambda: _sim(args))
