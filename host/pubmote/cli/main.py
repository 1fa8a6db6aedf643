"""The `pubmote` command: one entry point, one subcommand per job."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from pubmote import __version__

BRIDGE_EPILOG = """\
examples:
  pubmote bridge --sim-boards 2                    two simulated boards, live view
  pubmote bridge --serial /dev/ttyUSB0:115200 --sp-pub tcp://127.0.0.1:5560
  pubmote bridge --config gateway.toml --no-view
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
"""


# Subcommands whose code lives in a module of their own: each module has
# `register(sub)`, which adds its parser and sets `run` (args -> exit code) as a default.
# Registering stays cheap; the heavy imports happen inside `run`.
# (The pipeline keeps its old home, pubmote_bridge, until it moves beside the rest.)
COMMAND_MODULES: tuple[str, ...] = ("pubmote_bridge.pipeline_cli", "pubmote.cli.mesh",
                                    "pubmote.cli.dht", "pubmote.cli.sub")


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (what was wrong, where to read more) and
    exit status 2; every subcommand's parser is one of these."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, "%s: %s (see %s --help)\n" % (self.prog, message, self.prog))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pubmote",
        description="pubmote: publish/subscribe for microcontrollers (gateway side).",
    )
    parser.add_argument("--version", action="version", version="pubmote " + __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
                   help="listen for boards over TCP (WiFi boards; repeatable)")
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

    s = sub.add_parser(
        "sim", help="run simulated boards on their own, for a bridge started separately",
        description="Start N simulated boards (sim1..simN) on ptys in DIR and keep them "
                    "running; a bridge opens DIR/simK.tty with --serial. Ctrl-C stops them.")
    s.add_argument("--boards", type=int, default=2, metavar="N", help="how many (default 2)")
    s.add_argument("--dir", required=True, metavar="DIR", help="where the ptys go")
    s.add_argument("--kind", choices=("unix", "pico"), default="unix",
                   help="unix (default: the MicroPython unix port) or pico (emulated Picos "
                        "running the firmware of `pubmote firmware build`)")
    s.add_argument("--period-ms", type=int, default=1000, metavar="MS",
                   help="demo publishing period (default 1000)")
    s.add_argument("--app", default="demo", metavar="MODULE",
                   help="the board app to run: demo (default) or a module with "
                        "`async def main(node)` found in --app-dir")
    s.add_argument("--app-dir", metavar="DIR", help="directory added to the boards' path")
    s.add_argument("--app-config", default="{}", metavar="JSON",
                   help="extra keys for every board's config, as a JSON object")

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
    fb.add_argument("--micropython", metavar="DIR",
                    help="a MicroPython source tree with its submodules (default: "
                         "$MICROPY_DIR, else the tarball in ../shared/rp2040/)")
    fb.add_argument("--out", metavar="DIR",
                    help="where firmware.uf2 and firmware.bin go (default build/firmware/BOARD)")

    f = sub.add_parser(
        "flash", help="put MicroPython on a board (esptool for ESP32, UF2 for RP2040)",
        description="Flash MicroPython firmware. ESP32 family: esptool with the chip and "
                    "offset of the board profile (ESP32 0x1000; S3/C3/C6 0x0). RP2040: the "
                    "UF2 is copied to the RPI-RP2 BOOTSEL drive (the board is put into its "
                    "bootloader with mpremote first if --port is given).")
    f.add_argument("--board", required=True,
                   help="board type: esp32, rp2040, or pico / pico_w (an RP2040 with the "
                        "firmware `pubmote firmware build` made)")
    f.add_argument("--port", help="serial port (required for ESP32)")
    f.add_argument("--firmware", metavar="FILE",
                   help=".bin (ESP32) or .uf2; for pico / pico_w the default is "
                        "build/firmware/BOARD/firmware.uf2 from `pubmote firmware build`")
    f.add_argument("--erase", action="store_true", help="erase the whole flash first")
    f.add_argument("--chip", help="ESP32 variant: esp32 (default), esp32s3, esp32c3, esp32c6")
    f.add_argument("--connect-attempts", type=int, metavar="N",
                   help="how often esptool tries to reach the bootloader (esptool's default 7)")

    dp = sub.add_parser(
        "deploy", help="copy pubmote to a board: .mpy files, config; verify; reset",
        description="Compile shared/ and firmware/ to .mpy for the board, copy the files "
                    "that changed with mpremote, write the board's config, verify every "
                    "file by SHA-256 and reset the board. A second deploy copies only what "
                    "changed. For the simulated board, PORT is DIR/repl of `pubmote simdev`.")
    dp.add_argument("--board", required=True, help="board type: esp32, rp2040, unix")
    dp.add_argument("--port", required=True, help="the board's REPL serial port")
    dp.add_argument("--name", default="board1", help="the board's name (default board1)")
    dp.add_argument("--link", choices=("uart", "stdio", "tcp", "udp", "pty"),
                    help="link to the bridge: uart, stdio (USB), tcp or udp (WiFi: give "
                         "--set host=GATEWAY --set ssid=NET --set password=PW), pty (the "
                         "simulated board); default: the profile's")
    dp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config entries (JSON values), e.g. --set period_ms=200")
    dp.add_argument("--no-reset", action="store_true", help="do not reset after deploying")
    dp.add_argument("--key-file", metavar="FILE",
                    help="give the board a key from FILE (made there if the board has none; "
                         "mode 0600): it then signs with HmacWithSha256; the bridge takes "
                         "the same file with --keys")
    dp.add_argument("--timeout", type=float, default=60, metavar="S",
                    help="give up when the board does not answer a step within S seconds "
                         "(default 60)")

    sd = sub.add_parser(
        "simdev", help="a simulated board to flash-free deploy to (mpremote over a pty)",
        description="Run a simulated board in DIR: DIR/repl is its REPL (mpremote, every "
                    "command prefixed with resume), DIR/tty its line to the bridge "
                    "(`pubmote bridge --serial DIR/tty`), DIR/flash its filesystem. A soft "
                    "reset (what `pubmote deploy` ends with) reboots it into main.py.")
    sd.add_argument("--dir", required=True, metavar="DIR")

    d = sub.add_parser(
        "dissect", help="decode an NDN packet or LpPacket as a JSON tree",
        description="Print the canonical JSON tree of one NDN packet or NDNLPv2 LpPacket: "
                    "element names, Names as URIs, binary values as hex, notify parameters "
                    "and signature validity. Same output as `micropython -m "
                    "pubmote_wire.dissect HEX` on a board.")
    d.add_argument("hex", metavar="HEX", nargs="?",
                   help="the packet as hex, or - to read hex from stdin")
    d.add_argument("--trace", metavar="FILE",
                   help="dissect every packet of a `pubmote bridge --trace` file instead")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    run = getattr(args, "run", None)
    if run is not None:
        code: int = run(args)
        return code
    if args.command == "dissect":
        return _dissect(args)
    if args.command == "sim":
        try:
            _json_object(args.app_config, "--app-config")
        except ValueError as e:
            print("pubmote sim: %s" % e, file=sys.stderr)
            return 2
        return _run_until_interrupted(_sim(args))
    if args.command == "bridge":
        return _bridge(args)
    if args.command == "flash":
        return _flash(args)
    if args.command == "firmware":
        return _firmware(args)
    if args.command == "deploy":
        return _deploy(args)
    if args.command == "simdev":
        return _run_until_interrupted(_simdev(args))
    parser.error("unknown command")
    return 2


def _dissect(args: argparse.Namespace) -> int:
    from pubmote_wire import dissect

    if args.trace:
        from pubmote.core.trace import format_trace

        try:
            for block in format_trace(args.trace):
                print(block)
        except OSError as e:
            print("pubmote dissect: %s" % e, file=sys.stderr)
            return 1
        return 0
    if args.hex is None:
        print("pubmote dissect: give HEX, - (stdin) or --trace FILE", file=sys.stderr)
        return 2
    text = sys.stdin.read() if args.hex == "-" else args.hex
    out, ok = dissect.dissect_hex(text)
    print(out)
    return 0 if ok else 1


def _firmware(args: argparse.Namespace) -> int:
    from pubmote.boards.fwbuild import BuildError, build

    try:
        build(args.board, micropython=args.micropython,
              out=Path(args.out) if args.out else None,
              progress=lambda line: print(line, flush=True))
    except BuildError as e:
        print("pubmote firmware build: %s" % e, file=sys.stderr)
        return 1
    return 0


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


def _deploy(args: argparse.Namespace) -> int:
    from pubmote.boards.deploy import DeployError, deploy, reset

    settings: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            print("pubmote deploy: --set wants KEY=VALUE, not %r" % item, file=sys.stderr)
            return 2
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    if args.key_file:
        from pubmote.core.auth import key_for_board

        settings["key"] = key_for_board(args.key_file, args.name).hex()
    try:
        counts = deploy(args.port, args.board, args.name, link=args.link, settings=settings,
                        timeout_s=args.timeout)
        if not args.no_reset:
            reset(args.port, args.board)
    except ValueError as e:  # the command was wrong: board, link, config
        print("pubmote deploy: %s" % e, file=sys.stderr)
        return 2
    except DeployError as e:
        print("pubmote deploy: %s" % e, file=sys.stderr)
        return 1
    print("deployed %s: %d copied, %d unchanged%s" % (
        args.name, counts["copied"], counts["unchanged"], "" if args.no_reset else ", reset"))
    return 0


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


def _json_object(text: str | None, flag: str) -> dict[str, Any] | None:
    """A flag's JSON object, or None when not given; a ValueError naming the flag."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError("%s %s: not JSON (%s); e.g. '{\"period_ms\": 200}'"
                         % (flag, text, e.msg)) from None
    if not isinstance(value, dict):
        raise ValueError("%s %s: expected a JSON object, e.g. '{\"period_ms\": 200}'"
                         % (flag, text))
    return value


def _bridge(args: argparse.Namespace) -> int:
    from pubmote.gateway.bridge import load_config

    overrides: dict[str, Any] = {
        "sim_boards": args.sim_boards, "sim_kind": args.sim_kind, "sim_dir": args.sim_dir,
        "sim_period_ms": args.sim_period_ms, "sim_app": args.sim_app,
        "sim_app_dir": args.sim_app_dir,
        "sim_app_config": args.sim_app_config,
        "serial": args.serial, "udp": args.udp,
        "tcp": args.tcp, "sp_pub": args.sp_pub, "sp_sub": args.sp_sub,
        "ndn_face": args.ndn_face, "trace": args.trace, "keys": args.keys,
        "require_signed": args.require_signed, "journal": args.journal,
        "journal_max_bytes": args.journal_max_bytes,
        "journal_max_age_s": args.journal_max_age_s, "journal_fsync": args.journal_fsync,
        "gateway": args.gateway, "name": args.name, "mesh_listen": args.mesh_listen,
        "mesh_peer": args.mesh_peer, "realm": args.realm, "realm_member": args.realm_member,
        "mesh_key_file": args.mesh_key_file, "mesh_topics": args.mesh_topics}
    from pubmote.cli.config_check import check

    try:
        overrides["sim_app_config"] = _json_object(args.sim_app_config, "--sim-app-config")
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
    return _run_until_interrupted(_run_bridge(cfg, view, every))


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


async def _sim(args: argparse.Namespace) -> None:
    from pubmote.boards.fleet import SimFleet

    extra = _json_object(args.app_config, "--app-config") or {}
    fleet = SimFleet(args.boards, Path(args.dir), kind=args.kind, period_ms=args.period_ms,
                     app=args.app,
                     app_dir=Path(args.app_dir) if args.app_dir else None, extra=extra)
    fleet.start()
    try:
        for b in fleet.boards:
            print("%s %s" % (b.name, b.port), flush=True)
        while True:
            await asyncio.sleep(1)
            for b in fleet.boards:
                if not b.alive():
                    print("%s exited; see %s" % (b.name, b.log_path), file=sys.stderr)
                    b.start()
    finally:
        fleet.stop()


def _run_until_interrupted(coro: Any) -> int:
    """Run coro; SIGINT/SIGTERM cancel it so every `finally` runs and nothing is left behind."""

    async def runner() -> None:
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(runner())
    except (OSError, ValueError) as e:
        print("pubmote: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
