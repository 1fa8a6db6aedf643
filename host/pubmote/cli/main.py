"""The `pubmote` command: one entry point, one module per command (each adds its parser
with `register(sub)` and sets `run`, args -> exit status, as its default)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, NoReturn

from pubmote import __version__

# In the order `pubmote --help` lists them. Registering stays cheap: the heavy imports
# happen inside each command's `run`.
COMMAND_MODULES: tuple[str, ...] = (
    "pubmote.cli.bridge", "pubmote.cli.sim", "pubmote.cli.firmware", "pubmote.cli.flash",
    "pubmote.cli.deploy", "pubmote.cli.update", "pubmote.cli.simdev", "pubmote.cli.dissect",
    "pubmote.cli.pipeline", "pubmote.cli.mesh", "pubmote.cli.dht", "pubmote.cli.tls",
    "pubmote.cli.sub", "pubmote.cli.pub")


EXIT_INTERRUPTED = 130  # 128 + SIGINT


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (what was wrong, where to read more) and
    exit status 2; every subcommand's parser is one of these."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, "%s: %s (see %s --help)\n" % (self.prog, message, self.prog))

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # an option typed by a kind (cli/kinds.py): its reason, with the option and the
        # value, instead of argparse's "invalid <type> value"
        if getattr(action.type, "kind_check", False):
            from pubmote.cli.kinds import KindError, flag_name, show

            try:
                return action.type(arg_string)  # type: ignore[misc,operator]
            except KindError as e:
                raise argparse.ArgumentError(None, "%s %s: %s" % (
                    flag_name(action), show(arg_string), e)) from None
        return super()._get_value(action, arg_string)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pubmote",
        description="pubmote: publish/subscribe for microcontrollers (gateway side).",
    )
    parser.add_argument("--version", action="version", version="pubmote " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = None
    try:
        parser = build_parser()  # Ctrl-C may come while the commands' modules load
        args = parser.parse_args(argv)
        command = args.command
        if command is None:
            parser.print_help()
            return 0
        run = getattr(args, "run", None)
        if run is None:
            parser.error("unknown command")
        code: int = run(args)
    except KeyboardInterrupt:
        # Ctrl-C: every command stops the same way, without a traceback, with the status a
        # shell gives a program ended by SIGINT (children got the same SIGINT from the
        # terminal; a command that counts things prints its summary in its own finally)
        print("pubmote%s: interrupted" % (" " + command if command else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
