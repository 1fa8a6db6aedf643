"""`pubmote bridge`: assemble the hub, the board faces, the SP endpoints, the mesh and the
DHT from a configuration, run them (and the boards handed in, e.g. simulated ones) until
cancelled, and tear everything down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tomllib
from typing import Any, Protocol

from pubmote.core.addresses import DEFAULT_BAUD, parse_hostport, parse_serial
from pubmote.core.auth import BoardAuth, load_keys
from pubmote.core.hub import Hub
from pubmote.core.journal import Journal
from pubmote.core.limits import DEFAULTS as LIMIT_DEFAULTS
from pubmote.core.limits import LimitHits, Limits
from pubmote.core.trace import Tracer
from pubmote.faces.board import BoardFace, next_face_id
from pubmote.faces.ndn import NdnFaceServer
from pubmote.faces.serial import SerialFace
from pubmote.faces.sp import SpEndpoint
from pubmote.faces.stream import StreamListener
from pubmote.faces.udp import UdpServer
from pubmote_wire import name as ndn_name
from pubmote_wire import sp

log = logging.getLogger("pubmote.bridge")

SIM_PORT_QUIET_S = 15.0  # a simulated board's pty comes up after the bridge: not an error

DEFAULTS: dict[str, Any] = {
    "gateway": "gw",
    "serial": [],
    "udp": [],
    "tcp": [],
    "sp_pub": [],
    "sp_sub": [],
    "ndn_face": [],
    "trace": None,
    "keys": None,
    "require_signed": [],
    "journal": None,
    "journal_max_bytes": 8 << 20,
    "journal_max_age_s": 60.0,
    "journal_fsync": "rotate",
    "sim_boards": 0,
    "sim_kind": "unix",
    "sim_dir": None,
    "sim_period_ms": 1000,
    "sim_app": "demo",
    "sim_app_dir": None,
    "sim_app_config": {},
    "timeout_ms": 2000,
    "board_queue_len": 64,
    "sp_buffer_bytes": 1 << 20,
    # retained topics on the BitTorrent DHT (BEP 44 items, BEP 50 overlays): gateway/retained.py
    "retained": [],
    "dht_key_file": None,
    "dht_pubkey": None,
    "dht_host": "0.0.0.0",
    "dht_port": 0,
    "dht_bootstrap": [],
    "dht_timeout_s": 2.0,
    # the gateway mesh (GossipSub over libp2p) and directed addressing: gateway/mesh/relay.py
    "name": None,            # this gateway's name in the mesh and in addresses (= gateway)
    "mesh_listen": [],       # multiaddrs to listen on, /ip4/0.0.0.0/tcp/4001
    "mesh_peer": [],         # gateways to stay connected to, /ip4/H/tcp/P/p2p/PEERID
    "mesh_key_file": None,   # libp2p identity (default ~/.config/pubmote/mesh.key)
    "realm": "pubmote",      # gossip topics are /<realm>/<category>/<topic>
    "realm_member": [],      # PeerIds (or key files) that may publish; empty = open realm
    "mesh_topics": ["*"],    # board-topic roots with their own gossip topic; * = the rest
    "mesh_out_queue": 8192,  # envelopes waiting for the router; beyond, dropped and counted
    # resource limits: connection caps per listener and per source address, handshake and
    # idle timeouts, the hub's tables (core/limits.py; one table of them: docs/limits.md)
    **LIMIT_DEFAULTS,
}


# what `pubmote bridge` binds when neither flags nor the config name SP endpoints
# (`--sp-pub none` binds none); load_config for a library user or a test binds nothing
SP_DEFAULTS = {"sp_pub": "tcp://127.0.0.1:5560", "sp_sub": "tcp://127.0.0.1:5561"}


def load_config(path: str | None, overrides: dict[str, Any],
                sp_defaults: bool = False) -> dict[str, Any]:
    """Defaults, then the TOML file (top-level keys or a [bridge] table), then flags.
    With sp_defaults (the command line), SP_DEFAULTS where neither gives sp_pub/sp_sub."""
    cfg = dict(DEFAULTS)
    data: dict[str, Any] = {}
    if path:
        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ValueError("--config %s: not valid TOML (%s)" % (path, e)) from None
        data = data.get("bridge", data)
        unknown = set(data) - set(DEFAULTS)
        if unknown:
            raise ValueError("unknown keys in %s: %s" % (path, ", ".join(sorted(unknown))))
        for k, v in data.items():
            cfg[k] = v
    for k, v in overrides.items():
        if v is None or v == []:
            continue
        cfg[k] = v
    if sp_defaults:
        for k, url in SP_DEFAULTS.items():
            if k not in data and not overrides.get(k):
                cfg[k] = [url]
    for k in ("serial", "udp", "tcp", "sp_pub", "sp_sub", "ndn_face", "require_signed",
              "mesh_listen", "mesh_peer", "realm_member", "mesh_topics"):
        if isinstance(cfg[k], str):
            cfg[k] = [cfg[k]]
    for k in ("sp_pub", "sp_sub"):
        if isinstance(cfg[k], list):  # `none` turns an endpoint (or its default) off
            cfg[k] = [u for u in cfg[k] if not (isinstance(u, str) and u.lower() == "none")]
    if cfg["name"]:
        cfg["gateway"] = cfg["name"]  # `name` (the mesh's word) and `gateway` are one thing
    return cfg


class BoardSource(Protocol):
    """Boards that start and stop with the bridge (`pubmote bridge --sim-boards`: the
    simulated fleet). The bridge opens their serial ports; the others dial its faces."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def serial_ports(self) -> list[str]: ...


class Bridge:
    """A running bridge; use `async with Bridge(cfg) as b:` then `await b.wait()`."""

    def __init__(self, cfg: dict[str, Any], *, fleet: BoardSource | None = None) -> None:
        if cfg["sim_boards"] and fleet is None:
            raise ValueError("sim_boards is set: pass the boards, "
                             "fleet=pubmote.boards.fleet.SimFleet.from_config(cfg)")
        self.cfg = cfg
        self.limits = Limits.from_config(cfg)
        self.hits = LimitHits()  # every limit hit, by key: the status line and the view
        self.hub = Hub(gateway=cfg["gateway"], timeout_ms=cfg["timeout_ms"],
                       board_queue_len=cfg["board_queue_len"], limits=self.limits,
                       hits=self.hits)
        self.faces: list[BoardFace] = []
        self.tcp: list[StreamListener] = []
        self.udp: list[UdpServer] = []
        self.sp: list[SpEndpoint] = []
        self.ndn: list[NdnFaceServer] = []
        self.tracer: Tracer | None = None
        self.journal: Journal | None = None
        self.servers: list[asyncio.AbstractServer | asyncio.DatagramTransport] = []
        self.fleet = fleet
        self._tasks: list[asyncio.Task[None]] = []
        self.retained: Any = None  # dht.retained.RetainedTopics when `retained` is set
        self.mesh: Any = None  # gateway.mesh.relay.GatewayMesh: directed routing, and the mesh

    async def __aenter__(self) -> Bridge:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def add_serial(self, port: str, baud: int = DEFAULT_BAUD, quiet_s: float = 0.0) -> SerialFace:
        """Open a board's serial line as a face (also while running: a board plugged in
        later)."""
        face = SerialFace(port, baud, self.hub.on_packet, self.hub.face_state, quiet_s)
        self.faces.append(face)
        self._tasks.append(asyncio.create_task(face.run()))
        return face

    async def start(self) -> None:
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        if cfg["keys"] or cfg["require_signed"]:
            keys = load_keys(cfg["keys"]) if cfg["keys"] else {}
            self.hub.auth = BoardAuth(keys, [ndn_name.from_uri(p) for p in cfg["require_signed"]])
            log.info("board keys: %d boards; signing required under %s", len(keys),
                     ", ".join(cfg["require_signed"]) or "no prefix")
        if cfg["journal"]:
            self.journal = Journal(cfg["journal"], max_bytes=int(cfg["journal_max_bytes"]),
                                   max_age_s=float(cfg["journal_max_age_s"]),
                                   fsync=str(cfg["journal_fsync"]))
            self.journal.open()
            self.hub.journal = self.journal
            self._tasks.append(asyncio.create_task(self._journal_ticks()))
        if cfg["trace"]:
            self.tracer = Tracer(cfg["trace"])
            self.hub.tracer = self.tracer
        lim, hits = self.limits, self.hits
        for url in cfg["ndn_face"]:
            ndn = NdnFaceServer(url, next_face_id, self.hub.on_packet, self.hub.face_state,
                                limits=lim, hits=hits)
            await ndn.start()
            self.ndn.append(ndn)
        for url in cfg["sp_pub"]:
            ep = SpEndpoint(self.hub, url, sp.PUB, int(cfg["sp_buffer_bytes"]), limits=lim,
                            hits=hits)
            await ep.start()
            self.sp.append(ep)
        for url in cfg["sp_sub"]:
            ep = SpEndpoint(self.hub, url, sp.SUB, limits=lim, hits=hits)
            await ep.start()
            self.sp.append(ep)
        for spec in cfg["tcp"]:
            host, port = parse_hostport(spec)
            listener = StreamListener(host, port, self.hub.on_packet, self._stream_state,
                                      limits=lim, hits=hits)
            await listener.start()
            self.tcp.append(listener)
        for spec in cfg["udp"]:
            host, port = parse_hostport(spec)
            transport, proto = await loop.create_datagram_endpoint(
                lambda: UdpServer(self.hub.on_packet, self.hub.face_state, limits=lim,
                                  hits=hits),
                local_addr=(host, port))
            self.udp.append(proto)
            self.servers.append(transport)
        for spec in cfg["serial"]:
            self.add_serial(*parse_serial(spec))
        if self.fleet is not None:
            self.fleet.start()
            for board_port in self.fleet.serial_ports():
                self.add_serial(board_port, DEFAULT_BAUD, quiet_s=SIM_PORT_QUIET_S)
        if cfg["retained"]:
            from pubmote.gateway.retained import from_config

            self.retained = await from_config(self.hub, cfg)
        from pubmote.gateway.mesh.relay import from_config as mesh_from_config

        self.mesh = await mesh_from_config(self.hub, cfg)

    async def _journal_ticks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if self.journal is not None:
                self.journal.tick()

    def _stream_state(self, face: BoardFace) -> None:
        if face.up and face not in self.faces:
            self.faces.append(face)
        elif not face.up and face in self.faces:
            self.faces.remove(face)
        self.hub.face_state(face)

    def all_faces(self) -> list[Any]:
        out: list[Any] = list(self.faces)
        for u in self.udp:
            out.extend(u.faces.values())
        for ndn in self.ndn:
            out.extend(ndn.faces.values())
        return out

    def status(self) -> str:
        """One line of counters: what --no-view logs now and then, and at exit."""
        hub = self.hub
        faces = self.all_faces()
        boards = sorted(b.name for b in hub.board_infos() if b.up)
        down = [f.label + (" (%s)" % f.last_error if getattr(f, "last_error", "") else "")
                for f in faces if not f.up]
        c = hub.stats()
        parts = ["boards up %d: %s" % (len(boards), ", ".join(boards) or "-")]
        if down:
            parts.append("down: %s" % "; ".join(down))
        parts.append("messages %d, bad packets %d, fetch failures %d, bad frames %d" % (
            c["messages"], c["bad_packets"], c["fetch_failed"],
            sum(f.bad_frames() for f in faces if hasattr(f, "bad_frames"))))
        for ep in self.sp:
            if ep.proto == sp.PUB:
                parts.append("SP PUB %s: %d clients, %d sent in %d writes, %d dropped, "
                             "bridge-added latency %s" % (
                                 ep.url, ep.clients(), ep.counters["sent"],
                                 ep.counters["writes"], ep.counters["dropped"],
                                 ep.latency.summary()))
            else:
                parts.append("SP SUB %s: %d clients, %d received, %d bad" % (
                    ep.url, ep.clients(), ep.counters["received"], ep.counters["bad_messages"]))
        parts.append("limits hit: %s" % self.limit_summary())
        return "; ".join(parts)

    def limit_summary(self) -> str:
        """How often each limit (docs/limits.md) was hit, `key n, ...`, or `none`."""
        host = self.mesh.host if self.mesh is not None else None
        mesh = {"mesh_" + k: n for k, n in host.limit_hits.items()} if host is not None else {}
        return self.hits.summary(mesh)

    async def wait(self) -> None:
        """Run until cancelled."""
        await asyncio.Event().wait()

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for listener in self.tcp:
            await listener.close()
        for f in self.faces:
            f.close()
        for ep in self.sp:
            await ep.close()
        for ndn in self.ndn:
            await ndn.close()
        for s in self.servers:
            s.close()
            if isinstance(s, asyncio.AbstractServer):
                with contextlib.suppress(Exception):
                    await s.wait_closed()
        if self.mesh is not None:
            await self.mesh.close()
            self.mesh = None
        if self.retained is not None:
            await self.retained.close()
            self.retained = None
        await self.hub.close()
        if self.fleet is not None:
            self.fleet.stop()
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None
        if self.journal is not None:
            self.journal.close()
            self.hub.journal = self.journal = None
