"""`pubmote update`: update boards' apps over their links, through the running bridge's
local control endpoint (gateway/update/control.py), and show where each board is."""

from __future__ import annotations

import argparse
import base64
import json
import socket
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg

_HELP = """\
examples:
  pubmote update --app myapp/ sim1 sim2            two boards
  pubmote update --app myapp/ --all --canary 1     one board first, the rest once it is healthy
  pubmote update --app myapp/ --config period_ms=500 --timeout 90 sim1
  pubmote update --status                          where each board is

The bridge serves the files as NDN Data segments; each board checks them against a
manifest signed with its key, stages them, switches atomically and reboots into the new
app on trial: unless the app registers and stays registered for --grace seconds (or has a
publish acked) within --timeout, the board goes back to its previous app by itself and the
bridge reports why. Exit status: 0 all boards healthy, 1 any not, 2 a mistake.
The bridge's endpoint: $PUBMOTE_CONTROL, else $XDG_RUNTIME_DIR/pubmote/bridge.sock, else
/tmp/pubmote-UID/bridge.sock (a unix socket, mode 0600)."""


def register(sub: Any) -> None:
    """Add `update` to the `pubmote` parser."""
    p = sub.add_parser(
        "update", help="update boards' apps over their links (staged, checked, rolled back)",
        description="Update the app (and config) of boards connected to the running bridge "
                    "over the links they already have.",
        epilog=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("boards", nargs="*", metavar="BOARD", type=arg(kinds.name),
                   help="the boards to update, by name (in this order; the canaries first)")
    p.add_argument("--app", metavar="DIR", type=arg(file_kinds.folder_in),
                   help="the app: a flat folder of .py/.mpy/.json files; the module that "
                        "runs is app.py's, the only module, or --config app=NAME")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   type=arg(kinds.board_setting),
                   help="config keys the new app runs with (JSON values), over the board's "
                        "own; repeatable")
    p.add_argument("--all", action="store_true",
                   help="every board registered with the bridge (by name order)")
    p.add_argument("--canary", type=arg(kinds.whole(0)), default=0, metavar="N",
                   help="update the first N boards, then the rest only if all N came back "
                        "healthy (default 0: all at once)")
    p.add_argument("--timeout", type=arg(kinds.seconds()), default=60.0, metavar="S",
                   help="how long the new app has after its boot to become healthy before "
                        "the board rolls back (default 60)")
    p.add_argument("--grace", type=arg(kinds.seconds()), default=5.0, metavar="S",
                   help="healthy: registered for S seconds without a break, or a publish "
                        "acked (default 5)")
    p.add_argument("--status", action="store_true",
                   help="show each board's last update (state, bytes, why) and exit")
    p.set_defaults(run=_run)


def _mistake(msg: str) -> int:
    print("pubmote update: %s" % msg, file=sys.stderr)
    return 2


def _connect() -> socket.socket | None:
    from pubmote.gateway.update.control import control_path

    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(control_path())
    except OSError:
        s.close()
        return None
    return s


def _run(args: argparse.Namespace) -> int:
    from pubmote.gateway.update.control import control_path
    from pubmote.gateway.update.package import PackageError, read_app_dir

    if args.status:
        if args.app or args.boards or args.all:
            return _mistake("--status takes no --app, boards or --all")
        req: dict[str, Any] = {"cmd": "status"}
    else:
        if not args.app:
            return _mistake("give --app DIR (or --status)")
        if bool(args.boards) == bool(args.all):
            return _mistake("name the boards to update, or --all (not both)")
        config = dict(args.config)
        try:
            pkg = read_app_dir(args.app, config)
        except PackageError as e:
            return _mistake(str(e))
        if args.canary and args.boards and args.canary >= len(args.boards):
            return _mistake("--canary %d: fewer than the %d boards named" % (
                args.canary, len(args.boards)))
        req = {"cmd": "update", "boards": args.boards, "all": args.all,
               "files": [[n, base64.b64encode(d).decode()] for n, d in pkg.files],
               "config": pkg.config, "canary": args.canary, "timeout_s": args.timeout,
               "grace_s": args.grace}
    s = _connect()
    if s is None:
        return _mistake("no bridge running (nothing answers on %s; start `pubmote bridge`, "
                        "or set PUBMOTE_CONTROL to its endpoint)" % control_path())
    with s, s.makefile("rb") as f:
        s.sendall(json.dumps(req).encode() + b"\n")
        code = 1
        for line in f:
            msg = json.loads(line)
            if "error" in msg:
                return _mistake(msg["error"])
            if args.status:
                _print_status(msg)
                return 0
            if msg.get("event") == "board":
                print(_board_line(msg), flush=True)
            elif msg.get("event") == "done":
                n_ok = sum(b["state"] == "healthy" for b in msg["boards"])
                print("update: %d of %d boards healthy in %.1f s" % (
                    n_ok, len(msg["boards"]), msg["seconds"]), flush=True)
                code = 0 if msg["ok"] else 1
        return code


def _board_line(b: dict[str, Any]) -> str:
    line = "%-10s %-10s %6d/%d bytes  %5.1f s" % (b["board"], b["state"], b["bytes"],
                                                 b["total"], b["seconds"])
    if b.get("heap"):
        line += "  (updater %s)" % b["heap"]
    return line + ("  " + b["why"] if b.get("why") else "")


def _print_status(msg: dict[str, Any]) -> None:
    if not msg["boards"]:
        print("no boards")
    for b in msg["boards"]:
        up = "up" if b["up"] else "down"
        if b["state"] == "-":
            print("%-10s %-5s no update" % (b["board"], up))
        else:
            print("%-5s %s (update %s)" % (up, _board_line(b), b["version"]))
    if msg.get("running"):
        print("an update is running")
