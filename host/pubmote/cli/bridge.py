"""`pubmote bridge`: the gateway bridge between boards and SP/NDN clients and the mesh."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from pubmote.cli.common import json_object, run_until_interrupted

BRIDGE_EPILOG = """\
examples:
  pubmote bridge --sim-boards 2                    two simulated boards, live view
  pubmote bridge --serial /dev/ttyUSB0:115200 --sp-pub tcp://127.0.0.1:5560
  pubmote bridge --config gateway.toml --no-view
  pubmote tls init --dir ~/.config/pubmote/tls     then, for encrypted WiFi boards:
  pubmote bridge --tcp 0.0.0.0:6365 --tcp-tls-cert ~/.config/pubmote/tls/gateway.crt \
      --tcp-tls-key ~/.config/pubmote/tls/gateway.key
  pubmote bridge --sim-boards 1 --name gw1 --mesh-listen /ip4/0.0.0.0/tcp/4001
  pubmote bridge --sim-boards 1 --name gw2 --mesh-key-file gw2.key \\
      --mesh-listen /ip4/0.0.0.0/tcp/4002 --mesh-peer /ip4/127.0.0.1/tcp/4001/p2p/PEERID

SP endpoints: unless --sp-pub/--sp-sub (or the config) say otherwise, the bridge binds
PUB on tcp://127.0.0.1:5560 and SUB on tcp://127.0.0.1:5561; `--sp-pub none --sp-sub none`
binds neither. Subscribers: `pubmote sub tcp://127.0.0.1:5560 /pubmote/` (CBOR payloads
decoded) or `nanocat --sub --connect tcp://127.0.0.1:5560 --subscribe /pubmote/ -A`
receive every relayed message as `<topic URI>|<payload>`. Publishers connect a PUB
socket to :5561 (--sp-sub) and send the same form; boards whose filters match receive it.
With --no-view the bridge logs a status line every 60 s (10 s with -v; -vv adds every
message and bad packet) and a summary at exit.
Directed messages: publish `/pubmote/to/ADDRESS|<topic>|<body>` where ADDRESS
is GATEWAY/BOARD, GATEWAY, GATEWAY/*, * or */*; receivers get /pubmote/to/ADDRESS with a
CBOR map {a, o, t, p, ts} (address, originator, topic, body, ms).
The TOML config takes the same names as the flags (sp_pub, sim_boards, mesh_peer, ...),
at top level or in a [bridge] table; flags given on the command line override it.
Ctrl-C and SIGTERM stop in order: nothing new is acked, everything acked is written to
the SP subscribers (up to 2 s each), the journal is closed last; exit status 130 after
Ctrl-C, 0 after SIGTERM (docs/guarantees.md).
"""


def register(sub: Any) -> None:
    """Add `bridge` to the `pubmote` parser."""
    b = sub.add_parser(
        "bridge", help="run the gateway bridge between boards and SP/NDN clients",
        description="Relay board traffic: boards publish and subscribe through this gateway.",
        epilog=BRIDGE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--sim-boards", type=int, metavar="N",
                   help="start N simulated boards (sim1..simN: the MicroPython unix port "
                        "running the firmware, each on a pty opened like a real board)")
    b.add_argument("--sim-kind", choices=("unix", "pico"),
                   help="what the simulated boards are: unix (default: the MicroPython unix "
                        "port, fast) or pico (an emulated Raspberry Pi Pico running the real "
                        "rp2 firmware of `pubmote firmware build` in rp2040js, its UART0 at "
                        "115200 baud on the pty; config in a littlefs image in its flash)")
    b.add_argument("--sim-dir", metavar="DIR",
                   help="where the simulated boards' ptys, configs and logs go "
                        "(default: a temporary directory removed at exit)")
    b.add_argument("--sim-period-ms", type=int, metavar="MS",
                   help="how often the simulated demo boards publish (default 1000)")
    b.add_argument("--sim-app", metavar="MODULE",
                   help="the app the simulated boards run (default demo; else a module "
                        "with `async def main(node)` in --sim-app-dir)")
    b.add_argument("--sim-app-dir", metavar="DIR", help="directory added to the boards' path")
    b.add_argument("--sim-app-config", metavar="JSON",
                   help="extra keys for every simulated board's config, as a JSON object")
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
    b.add_argument("--trace", metavar="FILE",
                   help="record every packet (time, face, direction) as JSON lines in FILE; "
                        "read it with `pubmote dissect --trace FILE`")
    b.add_argument("--keys", metavar="FILE",
                   help="board keys (JSON, written by `pubmote deploy --key-file`): a board "
                        "with a key must sign its registration")
    b.add_argument("--allow-anonymous-boards", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="let boards without a key in --keys register by name (default: "
                        "only when no --keys is given; with --keys a name without a key is "
                        "refused; either way a registered name is bound to its connection "
                        "while the board is up, and a board publishes only as itself)")
    b.add_argument("--require-signed", action="append", default=[], metavar="PREFIX",
                   help="topics under PREFIX accept only HmacWithSha256-signed, fresh, "
                        "never-replayed notifies and Data from boards with a key (repeatable)")
    b.add_argument("--journal", metavar="DIR",
                   help="record every relayed message and what became of it (JSON lines) "
                        "in DIR for the data pipeline; files appear when rotated")
    b.add_argument("--journal-max-bytes", type=int, metavar="N",
                   help="rotate journal files at N bytes (default 8 MiB)")
    b.add_argument("--journal-max-age", type=float, metavar="S", dest="journal_max_age_s",
                   help="rotate journal files after S seconds (default 60)")
    b.add_argument("--journal-fsync", choices=("none", "rotate", "always"),
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
    mesh.add_argument("--mesh-topic", action="append", default=[], dest="mesh_topics",
                      metavar="ROOT",
                      help="give board topics under /ROOT/ a gossip topic of their own "
                           "(repeatable); * (the default) carries all other roots")
    b.add_argument("--config", metavar="FILE", help="TOML configuration; flags override it")
    view = b.add_mutually_exclusive_group()
    view.add_argument("--view", dest="view", action="store_true", default=None,
                      help="show the live terminal view (default when stdout is a terminal)")
    view.add_argument("--no-view", dest="view", action="store_false",
                      help="log lines instead of the live view")
    b.add_argument("--status-every", type=float, metavar="S",
                   help="with --no-view: log a status line (boards, messages, SP clients, "
                        "errors) every S seconds (default 60; 10 with -v)")
    b.add_argument("-v", "--verbose", action="count", default=0,
                   help="with --no-view: -v a status line every 10 s instead of 60 s; -vv "
                        "also every message and every bad packet")
    b.set_defaults(run=_bridge)


def _bridge(args: argparse.Namespace) -> int:
    from pubmote.gateway.bridge import load_config

    overrides: dict[str, Any] = {
        "sim_boards": args.sim_boards, "sim_kind": args.sim_kind, "sim_dir": args.sim_dir,
        "sim_period_ms": args.sim_period_ms, "sim_app": args.sim_app,
        "sim_app_dir": args.sim_app_dir,
        "sim_app_config": args.sim_app_config,
        "serial": args.serial, "udp": args.udp,
        "tcp": args.tcp, "tcp_tls_cert": args.tcp_tls_cert, "tcp_tls_key": args.tcp_tls_key,
        "board_links_require_encryption": args.board_links_require_encryption,
        "sp_pub": args.sp_pub, "sp_sub": args.sp_sub,
        "ndn_face": args.ndn_face, "trace": args.trace, "keys": args.keys,
        "allow_anonymous_boards": args.allow_anonymous_boards,
        "require_signed": args.require_signed, "journal": args.journal,
        "journal_max_bytes": args.journal_max_bytes,
        "journal_max_age_s": args.journal_max_age_s, "journal_fsync": args.journal_fsync,
        "gateway": args.gateway, "name": args.name, "mesh_listen": args.mesh_listen,
        "mesh_peer": args.mesh_peer, "realm": args.realm, "realm_member": args.realm_member,
        "mesh_key_file": args.mesh_key_file, "mesh_topics": args.mesh_topics}
    from pubmote.cli.config_check import check

    try:
        overrides["sim_app_config"] = json_object(args.sim_app_config, "--sim-app-config")
        cfg = load_config(args.config, overrides, sp_defaults=True)
        check(cfg)
    except OSError as e:
        print("pubmote bridge: %s: %s" % (getattr(e, "filename", None) or "config",
                                           e.strerror or e), file=sys.stderr)
        return 2
    except ValueError as e:  # ConfigError, TOML syntax (tomllib's is a ValueError)
        print("pubmote bridge: %s" % e, file=sys.stderr)
        return 2
    if not (cfg["serial"] or cfg["udp"] or cfg["tcp"] or cfg["sim_boards"] or cfg["ndn_face"]
            or cfg["mesh_listen"] or cfg["mesh_peer"]):
        print("pubmote bridge: no boards: give --sim-boards N, --serial PORT, --udp, --tcp "
              "or join a mesh (see pubmote bridge --help)", file=sys.stderr)
        return 2
    view = sys.stdout.isatty() if args.view is None else args.view
    level = logging.WARNING if view else (logging.DEBUG if args.verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    every = args.status_every if args.status_every is not None else (
        10.0 if args.verbose else 60.0)
    if every <= 0:
        print("pubmote bridge: --status-every %g: give a number of seconds above 0"
              % args.status_every, file=sys.stderr)
        return 2
    return run_until_interrupted(_run_bridge(cfg, view, every))


async def _status_lines(bridge: Any, every_s: float) -> None:
    log = logging.getLogger("pubmote.bridge")
    while True:
        await asyncio.sleep(every_s)
        log.info("status: %s", bridge.status())


async def _run_bridge(cfg: dict[str, Any], view: bool, status_every_s: float = 60.0) -> None:
    from pubmote.boards.fleet import SimFleet
    from pubmote.gateway.bridge import Bridge

    fleet = SimFleet.from_config(cfg) if cfg["sim_boards"] else None
    async with Bridge(cfg, fleet=fleet) as bridge:
        log = logging.getLogger("pubmote.bridge")
        log.info("bridge up: gateway %s, %d faces, SP %s", cfg["gateway"],
                 len(bridge.faces), [ep.url for ep in bridge.sp])
        if bridge.mesh is not None and bridge.mesh.host is not None:
            h = bridge.mesh.host
            for a in h.listen_addrs:  # tests and people read the real port from here
                print("mesh listen: %s" % a.with_p2p(str(h.peer_id)), flush=True)
        if fleet is not None:
            for b in fleet.boards:
                log.info("simulated board %s on %s (log %s)", b.name, b.port, b.log_path)
        if view:
            from pubmote.gateway.view import live_view

            await live_view(bridge)
        else:
            try:
                await _status_lines(bridge, status_every_s)
            finally:
                log.info("summary: %s", bridge.status())
