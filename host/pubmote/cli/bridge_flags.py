"""`pubmote bridge`'s flags: each sets the config key of its name (--journal-max-age sets
journal_max_age) and is checked as that key's kind (gateway/config.py's table), so a
flag and its TOML key take the same values and are refused alike. The keys without a
flag are listed at the end of `pubmote bridge --help`."""

from __future__ import annotations

import argparse
from typing import Any

from pubmote.cli.config_kinds import resolve
from pubmote.cli.file_kinds import text_in
from pubmote.cli.kinds import arg
from pubmote.gateway.config import ALIASES, KEYS

# flags that are not config keys: they say how this run shows itself, or where the config is
CLI_ONLY = ("config", "view", "verbose")


def add_flags(b: argparse.ArgumentParser) -> None:
    """Add the bridge's flags to its parser, each typed by its config key's kind."""
    b.add_argument("--sim-boards", metavar="N",
                   help="start N simulated boards (sim1..simN: the MicroPython unix port "
                        "running the firmware, each on a pty opened like a real board)")
    b.add_argument("--sim-kind", metavar="{unix,pico}",
                   help="what the simulated boards are: unix (default: the MicroPython unix "
                        "port, fast) or pico (an emulated Raspberry Pi Pico running the real "
                        "rp2 firmware of `pubmote firmware build` in rp2040js, its UART0 at "
                        "115200 baud on the pty; config in a littlefs image in its flash)")
    b.add_argument("--sim-dir", metavar="DIR",
                   help="where the simulated boards' ptys, configs and logs go "
                        "(default: a temporary directory removed at exit)")
    b.add_argument("--sim-period-ms", metavar="MS",
                   help="how often the simulated demo boards publish (default 1000)")
    b.add_argument("--sim-app", metavar="MODULE",
                   help="the app the simulated boards run (default demo; else a module "
                        "with `async def main(node)` in --sim-app-dir)")
    b.add_argument("--sim-app-dir", metavar="DIR", help="directory added to the boards' path")
    b.add_argument("--sim-app-config", metavar="JSON",
                   help="extra keys for every simulated board's config, as a JSON object")
    b.add_argument("--sim-keys", action=argparse.BooleanOptionalAction, default=None,
                   help="give each simulated board a key of its own, kept 0600 in the sim "
                        "directory and handed to the bridge (default); --no-sim-keys: "
                        "boards without a key (then --allow-anonymous-boards too)")
    b.add_argument("--serial", action="append", default=[], metavar="PORT[:BAUD]",
                   help="a board on a serial port (repeatable; default baud 115200); "
                        "the port is reopened when it disappears and comes back")
    b.add_argument("--udp", action="append", default=[], metavar="HOST:PORT",
                   help="listen for boards over UDP (WiFi boards; repeatable)")
    b.add_argument("--tcp", action="append", default=[], metavar="HOST:PORT",
                   help="listen for boards over TCP (WiFi boards; repeatable); with "
                        "--tcp-tls-cert, encrypted")
    tls = b.add_argument_group(
        "encrypted WiFi board links (README: TLS for WiFi boards; docs/security.md)")
    tls.add_argument("--tcp-tls-cert", metavar="FILE",
                     help="TLS on the --tcp face with this certificate (PEM). Make one with "
                          "`pubmote tls init --dir DIR`, then deploy boards with "
                          "`pubmote deploy --link tcp --gateway-cert DIR/gateway.crt` so "
                          "they verify this gateway")
    tls.add_argument("--tcp-tls-key", metavar="FILE",
                     help="the certificate's private key (PEM; refused unless mode 0600)")
    tls.add_argument("--board-links-require-encryption", action=argparse.BooleanOptionalAction,
                     default=None,
                     help="refuse board links that are not encrypted: plaintext boards on "
                          "--tcp are counted and refused, and --udp (not encryptable) stops "
                          "the start. Default: on when --tcp-tls-cert is given; "
                          "--no-board-links-require-encryption accepts clear boards beside "
                          "TLS ones while boards are moved over")
    b.add_argument("--sp-pub", action="append", default=[], metavar="URL",
                   help="bind an SP PUB endpoint (tcp://HOST:PORT or ipc:///PATH; "
                        "repeatable) where nanomsg/nng SUB sockets receive "
                        "`<topic URI>|<payload>` (default tcp://127.0.0.1:5560; none: no "
                        "PUB endpoint)")
    b.add_argument("--sp-sub", action="append", default=[], metavar="URL",
                   help="bind an SP SUB endpoint where nanomsg/nng PUB sockets publish "
                        "`<topic URI>|<payload>` to the boards (default "
                        "tcp://127.0.0.1:5561; none: no SUB endpoint)")
    b.add_argument("--ndn-face", action="append", default=[], metavar="URL",
                   help="listen for NDN applications as NFD does (tcp://127.0.0.1:6363 or "
                        "unix:///PATH; repeatable); apps set NDN_CLIENT_TRANSPORT to it")
    allow = b.add_argument_group(
        "SP and NDN apps beyond loopback (they have no authentication; docs/security.md). "
        "An --sp-sub or --ndn-face bound to another address than loopback needs both of its "
        "lists or the bridge does not start; on loopback the lists are optional and apply "
        "when given")
    allow.add_argument("--sp-sub-allow-from", action="append", default=[], metavar="NET",
                       help="an address or network (192.168.1.20, 192.168.1.0/24, fd00::/8) "
                            "allowed to connect to the SP SUB endpoints (repeatable); others "
                            "are closed at accept and counted (refused in the status line)")
    allow.add_argument("--sp-sub-allow-topics", action="append", default=[], metavar="PREFIX",
                       help="a topic prefix SP SUB publishers may publish into, e.g. "
                            "/pubmote/demo/sim1/command (repeatable); other messages are "
                            "refused and counted")
    allow.add_argument("--ndn-allow-from", action="append", default=[], metavar="NET",
                       help="an address or network allowed to connect to the NDN faces "
                            "(repeatable); others are closed at accept and counted")
    allow.add_argument("--ndn-allow-prefixes", action="append", default=[], metavar="PREFIX",
                       help="a name prefix NDN apps may publish (notify) and register "
                            "(rib/register) under (repeatable); others are refused (a 403 "
                            "for a register) and counted")
    b.add_argument("--trace", metavar="FILE",
                   help="record every packet (time, face, direction) as JSON lines in FILE; "
                        "read it with `pubmote dissect --trace FILE`")
    b.add_argument("--keys", metavar="FILE",
                   help="board keys (JSON, written by `pubmote deploy`, by default into "
                        "~/.config/pubmote/board-keys.json): a board with a key must sign "
                        "its registration, and publishes only on topics with its name as a "
                        "component plus the prefixes the file's \"grants\" give it")
    b.add_argument("--allow-anonymous-boards", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="let boards without a key register by name (default: refused, "
                        "counted as anonymous; the bridge says at start which mode it is in; "
                        "either way a registered name is bound to its connection while the "
                        "board is up, and a board publishes only as itself)")
    b.add_argument("--require-signed", action="append", default=[], metavar="PREFIX",
                   help="topics under PREFIX accept only HmacWithSha256-signed, fresh, "
                        "never-replayed notifies and Data from boards with a key (repeatable)")
    b.add_argument("--sleep-queue-max", metavar="N",
                   help="messages the bridge holds for a board asleep (node.sleep), the "
                        "oldest dropped and counted beyond (default 64; "
                        "docs/protocols/sleep.md)")
    b.add_argument("--sleep-queue-bytes", metavar="N",
                   help="bytes held for a board asleep, topic and payload plus 64 a message "
                        "(default 16384)")
    b.add_argument("--session-expiry-s", metavar="S",
                   help="a board asleep and not back S seconds after it said it would be is "
                        "forgotten with its queue (default 3600)")
    b.add_argument("--journal", metavar="DIR",
                   help="record every relayed message and what became of it (JSON lines) "
                        "in DIR for the data pipeline; files appear when rotated")
    b.add_argument("--journal-max-bytes", metavar="N",
                   help="rotate journal files at N bytes (default 8 MiB)")
    b.add_argument("--journal-max-age", metavar="S",
                   help="rotate journal files after S seconds (default 60)")
    b.add_argument("--journal-fsync", metavar="{none,rotate,always}",
                   help="none: the OS flushes; rotate (default): fsync each file before it "
                        "is put in place; always: fsync every record")
    b.add_argument("--gateway", metavar="NAME",
                   help="this gateway's name; its NDN prefix is /pubmote/gw/NAME (default gw)")
    b.add_argument("--name", metavar="GATEWAY",
                   help="this gateway's name in the mesh and in directed addresses "
                        "(/GATEWAY/board); the same as --gateway")
    mesh = b.add_argument_group(
        "gateway mesh (GossipSub over libp2p; see README: two gateways)")
    mesh.add_argument("--mesh-listen", action="append", default=[], metavar="MULTIADDR",
                      help="join the mesh, listening on MULTIADDR, e.g. /ip4/0.0.0.0/tcp/4001 "
                           "(repeatable)")
    mesh.add_argument("--mesh-peer", action="append", default=[], metavar="MULTIADDR",
                      help="a gateway to stay connected to, /ip4/HOST/tcp/PORT/p2p/PEERID "
                           "(its `pubmote mesh id`; repeatable; redialled when lost)")
    mesh.add_argument("--realm", metavar="NAME",
                      help="the realm: gossip topics are /NAME/pub/<topic root> and "
                           "/NAME/to/* (default pubmote)")
    mesh.add_argument("--realm-member", action="append", default=[], metavar="PEERID",
                      help="a gateway (PeerId, or its key file) allowed to publish into the "
                           "realm (repeatable); without any the realm is open to every peer")
    mesh.add_argument("--mesh-key-file", metavar="FILE",
                      help="this gateway's libp2p identity (made with mode 0600 when "
                           "missing; default ~/.config/pubmote/mesh.key, as `pubmote mesh id`)")
    mesh.add_argument("--mesh-topic", action="append", default=[],
                      metavar="ROOT",
                      help="give board topics under /ROOT/ a gossip topic of their own "
                           "(repeatable); * (the default) carries all other roots")
    b.add_argument("--config", metavar="FILE", type=arg(text_in),
                   help="TOML configuration; flags override it")
    view = b.add_mutually_exclusive_group()
    view.add_argument("--view", dest="view", action="store_true", default=None,
                      help="show the live terminal view: boards, topics, the status line's "
                           "figures and the last warnings (default when stdout is a terminal)")
    view.add_argument("--no-view", dest="view", action="store_false",
                      help="log lines instead of the live view")
    b.add_argument("--status-every", metavar="S",
                   help="with --no-view: log a status line (boards, messages, SP clients, "
                        "errors) every S seconds (default 60; 10 with -v)")
    b.add_argument("-v", "--verbose", action="count", default=0,
                   help="with --no-view: -v a status line every 10 s instead of 60 s; -vv "
                        "also every message and every bad packet")

    # argparse lists its actions only in _actions
    for action in b._actions:  # noqa: SLF001
        if action.dest in KEYS and action.nargs != 0:
            action.type = arg(resolve(KEYS[action.dest][1]))
    b.epilog = (b.epilog or "") + keys_help(key_flags(b))


def key_flags(b: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """config key -> the flag that sets it."""
    if b is None:
        b = argparse.ArgumentParser(add_help=False)
        add_flags(b)
    return {a.dest: max(a.option_strings, key=len) for a in b._actions  # noqa: SLF001
            if a.dest in KEYS and a.option_strings}


def keys_help(flags: dict[str, str]) -> str:
    """The --help section on the TOML file: the rule, the aliases, and every key without
    a flag, with its default."""
    lines = [
        "",
        "config keys (--config FILE, TOML, at top level or in a [bridge] table; flags on the",
        "command line override it): each flag above that sets something is the key of its",
        "name, --sim-boards 2 is sim_boards = 2, a repeatable flag's key takes a list",
        "(serial = [\"/dev/ttyUSB0\", \"/dev/ttyACM0\"]). Also accepted: %s." % ", ".join(
            "%s for %s" % (a, k) for a, k in sorted(ALIASES.items())),
        "docs/gateway.toml is an example of every key. Keys without a flag (default):"]
    for key, (default, _kind, what) in KEYS.items():
        if key not in flags:
            lines.append("  %-24s %s (%s)" % (key, what, _toml(default)))
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"%s"' % value
    if isinstance(value, list):
        return "[%s]" % ", ".join(_toml(v) for v in value)
    if isinstance(value, dict):
        return "{}" if not value else repr(value)
    return str(value)
