"""`pubmote bridge`: the gateway bridge between boards and SP/NDN clients and the mesh."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from pubmote.cli.bridge_flags import add_flags
from pubmote.cli.common import run_until_interrupted

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
    add_flags(b)
    b.set_defaults(run=_bridge)


def _bridge(args: argparse.Namespace) -> int:
    from pubmote.cli.config_check import check
    from pubmote.gateway.config import KEYS, load_config

    overrides = {k: getattr(args, k) for k in KEYS if hasattr(args, k)}
    try:
        cfg = load_config(args.config, overrides, sp_defaults=True)
        check(cfg)
    except ValueError as e:  # ConfigError; the file unreadable, not TOML, unknown keys
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
    every = cfg["status_every"] or (10.0 if args.verbose else 60.0)
    return run_until_interrupted(lambda: _run_bridge(cfg, view, every))


async def _status_lines(bridge: Any, every_s: float) -> None:
    log = logging.getLogger("pubmote.bridge")
    while True:
        await asyncio.sleep(every_s)
        log.info("status: %s", bridge.status())


async def _run_bridge(cfg: dict[str, Any], view: bool, status_every_s: float = 60.0) -> None:
    from pubmote.boards.fleet import SimFleet
    from pubmote.gateway.bridge import Bridge

    recent = None
    if view:  # from the start: the warnings of the bridge's start-up are on screen too
        from pubmote.gateway.recent import install

        recent = install()
    fleet = SimFleet.from_config(cfg) if cfg["sim_boards"] else None
    async with Bridge(cfg, fleet=fleet) as bridge:
        from pubmote.gateway.status import listeners

        log = logging.getLogger("pubmote.bridge")
        log.info("bridge up: gateway %s; %s", cfg["gateway"],
                 ", ".join(listeners(bridge)) or "no listener, no board")
        if bridge.mesh is not None and bridge.mesh.host is not None:
            h = bridge.mesh.host
            for a in h.listen_addrs:  # tests and people read the real port from here
                print("mesh listen: %s" % a.with_p2p(str(h.peer_id)), flush=True)
        if fleet is not None:
            for b in fleet.boards:
                log.info("simulated board %s on %s (log %s)", b.name, b.port, b.log_path)
        if view:
            from pubmote.gateway.view import live_view

            await live_view(bridge, recent=recent)
        else:
            try:
                await _status_lines(bridge, status_every_s)
            finally:
                log.info("summary: %s", bridge.status())
