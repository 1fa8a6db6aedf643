"""`pubmote deploy`: copy pubmote to a board, configure, verify, reset."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg

_DEFAULT_CERT = os.path.join("~", ".config", "pubmote", "tls", "gateway.crt")


def register(sub: Any) -> None:
    """Add `deploy` to the `pubmote` parser."""
    dp = sub.add_parser(
        "deploy", help="copy pubmote to a board: .mpy files, config; verify; reset",
        description="Compile shared/ and firmware/ to .mpy for the board, copy the files "
                    "that changed with mpremote, write the board's config, verify every "
                    "file by SHA-256 and reset the board. A second deploy copies only what "
                    "changed. For the simulated board, PORT is DIR/repl of `pubmote simdev`.")
    dp.add_argument("--board", required=True, type=arg(kinds.board),
                    help="board type: esp32, rp2040, unix")
    dp.add_argument("--port", required=True, type=arg(kinds.serial_port),
                    help="the board's REPL serial port")
    dp.add_argument("--name", default="board1", type=arg(kinds.name),
                    help="the board's name (default board1)")
    dp.add_argument("--link", choices=("uart", "stdio", "tcp", "udp", "pty"),
                    help="link to the bridge: uart, stdio (USB), tcp or udp (WiFi: give "
                         "--set host=GATEWAY --set ssid=NET --set password=PW), pty (the "
                         "simulated board); default: the profile's")
    dp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    type=arg(kinds.board_setting),
                    help="extra config entries (JSON values), e.g. --set period_ms=200")
    dp.add_argument("--no-reset", action="store_true", help="do not reset after deploying")
    dp.add_argument("--key-file", metavar="FILE", type=arg(file_kinds.board_keys_or_none),
                    help="the gateway's board keys file: the board gets its key from FILE "
                         "(a new 32-byte one if it has none, written to FILE, mode 0600, "
                         "only once the deploy succeeds) and signs with HmacWithSha256; "
                         "the bridge takes the same file with --keys. Default: "
                         "~/.config/pubmote/board-keys.json ($XDG_CONFIG_HOME); none: no "
                         "key (a bridge then needs --allow-anonymous-boards)")
    dp.add_argument("--gateway-cert", metavar="FILE", type=arg(file_kinds.cert_or_none),
                    help="the bridge's TLS certificate (`pubmote tls init`; the bridge's "
                         "--tcp-tls-cert): a tcp board then talks TLS and trusts only this "
                         "gateway. Default with --link tcp: %s when it exists; none: a "
                         "plaintext tcp board" % _DEFAULT_CERT)
    dp.add_argument("--timeout", type=arg(kinds.seconds()), default=60.0, metavar="S",
                    help="give up when the board does not answer a step within S seconds "
                         "(default 60)")
    dp.set_defaults(run=_deploy)


def _deploy(args: argparse.Namespace) -> int:
    from pubmote.boards.deploy import DeployError, deploy, reset

    settings: dict[str, Any] = dict(args.set)  # (key, value) pairs the schema accepted
    key = None
    key_file = args.key_file
    if key_file is None:
        from pubmote.core.auth import default_keys_file

        key_file = str(default_keys_file())
    if key_file.lower() != "none":
        from pubmote.core.auth import board_key

        try:
            key = board_key(key_file, args.name)
        except (OSError, ValueError) as e:
            print("pubmote deploy: --key-file %s: %s" % (
                key_file, e.strerror if isinstance(e, OSError) and e.strerror else e),
                file=sys.stderr)
            return 2
        settings["key"] = key.hex()
    try:
        settings.update(_gateway_cert(args))
        counts = deploy(args.port, args.board, args.name, link=args.link, settings=settings,
                        timeout_s=args.timeout)
        if not args.no_reset:
            reset(args.port, args.board)
        if key is not None:
            # only now: a deploy that failed leaves the gateway's keys file as it was
            from pubmote.core.auth import save_board_key

            save_board_key(key_file, args.name, key)
            print("key: board %s's key is in %s (the bridge's --keys)" % (args.name, key_file))
    except ValueError as e:  # the command was wrong: board, link, config
        print("pubmote deploy: %s" % e, file=sys.stderr)
        return 2
    except DeployError as e:
        print("pubmote deploy: %s" % e, file=sys.stderr)
        return 1
    print("deployed %s: %d copied, %d unchanged%s" % (
        args.name, counts["copied"], counts["unchanged"], "" if args.no_reset else ", reset"))
    return 0


def _gateway_cert(args: argparse.Namespace) -> dict[str, Any]:
    """The board's TLS settings from --gateway-cert (or the default certificate, for a tcp
    board, when `pubmote tls init` made one); ValueError for a link TLS cannot cover."""
    from pubmote.core.tlscert import board_settings

    given = args.gateway_cert
    if given is not None and given.lower() == "none":
        return {}
    if args.link != "tcp":
        if given is not None:
            raise ValueError("--gateway-cert: only --link tcp is encrypted (udp links are "
                             "authenticated by --key-file, not encrypted)")
        return {}
    path = given or os.path.expanduser(_DEFAULT_CERT)
    if given is None and not os.path.exists(path):
        return {}
    settings = board_settings(path)
    if given is None:
        print("TLS: the board will trust the gateway certificate %s (--gateway-cert none: "
              "no TLS)" % path)
    return settings
