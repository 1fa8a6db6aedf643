"""`pubmote bridge`: assemble the hub, the board faces, the SP endpoints, the mesh and the
DHT from a configuration, run them (and the boards handed in, e.g. simulated ones) until
cancelled, and tear everything down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from pubmote.core.addresses import DEFAULT_BAUD, log_exposure, parse_hostport, parse_serial
from pubmote.core.allowlist import AllowList
from pubmote.core.auth import BoardAuth, load_grants, load_keys
from pubmote.core.hub import Hub
from pubmote.core.journal import Journal
from pubmote.core.limits import LimitHits, Limits
from pubmote.core.trace import Tracer
from pubmote.faces.board import BoardFace, next_face_id
from pubmote.faces.ndn import NdnFaceServer
from pubmote.faces.serial import SerialFace
from pubmote.faces.sp import SpEndpoint
from pubmote.faces.stream import StreamListener
from pubmote.faces.tls import LinkGuard, server_context
from pubmote.faces.udp import UdpServer
from pubmote_wire import name as ndn_name
from pubmote_wire import sp

log = logging.getLogger("pubmote.bridge")

SIM_PORT_QUIET_S = 15.0  # a simulated board's pty comes up after the bridge: not an error

def board_links_encrypted(cfg: dict[str, Any]) -> bool:
    """Whether the configuration requires encrypted board links (explicitly, or by giving
    the --tcp face a certificate); ValueError, one line, for a combination that cannot
    work: a certificate without its key, encryption required of a --tcp face without a
    certificate, or of a --udp face (UDP links are authenticated, never encrypted)."""
    cert, key = cfg.get("tcp_tls_cert"), cfg.get("tcp_tls_key")
    if bool(cert) != bool(key):
        raise ValueError("--tcp-tls-cert and --tcp-tls-key go together (the gateway's "
                         "certificate and its private key; `pubmote tls init` makes both)")
    require = cfg.get("board_links_require_encryption")
    if require is None:
        require = bool(cert)
    if require and cfg.get("tcp") and not cert:
        raise ValueError("--board-links-require-encryption: the --tcp face has no "
                         "certificate; give --tcp-tls-cert FILE --tcp-tls-key FILE (make "
                         "them with `pubmote tls init --dir DIR`)")
    if require and cfg.get("udp"):
        raise ValueError("--udp %s: UDP board links are authenticated (board keys) but not "
                         "encrypted, and board links must be encrypted here (the default "
                         "once --tcp-tls-cert is given): move these boards to --tcp with TLS, "
                         "or accept them in clear with --no-board-links-require-encryption"
                         % ", ".join(cfg["udp"]))
    return bool(require)


class BoardSource(Protocol):
    """Boards that start and stop with the bridge (`pubmote bridge --sim-boards`: the
    simulated fleet). The bridge opens their serial ports; the others dial its faces. Their
    keys join the bridge's policy, so simulated boards run authenticated."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def serial_ports(self) -> list[str]: ...

    def board_keys(self) -> dict[str, bytes]: ...


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
                       hits=self.hits, sleep_queue_max=cfg["sleep_queue_max"],
                       sleep_queue_bytes=cfg["sleep_queue_bytes"],
                       session_expiry_s=cfg["session_expiry_s"])
        self.faces: list[BoardFace] = []
        self.tcp: list[StreamListener] = []
        self.udp: list[UdpServer] = []
        self.sp: list[SpEndpoint] = []
        self.ndn: list[NdnFaceServer] = []
        self.tracer: Tracer | None = None
        self.journal: Journal | None = None
        self.servers: list[asyncio.AbstractServer | asyncio.DatagramTransport] = []
        self.link_guard: LinkGuard | None = None  # the --tcp face's TLS, when configured
        self.fleet = fleet
        self._tasks: list[asyncio.Task[None]] = []
        self.retained: Any = None  # dht.retained.RetainedTopics when `retained` is set
        self.mesh: Any = None  # gateway.mesh.relay.GatewayMesh: directed routing, and the mesh
        self._rx_errors_gone = 0  # rx_errors of board TCP faces since closed
        self.control: Any = None  # gateway.update.control.ControlServer: `pubmote update`

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
        # board-link encryption first: a configuration that cannot hold it binds nothing
        self._set_link_guard()
        self._set_auth()
        self._set_journal_and_trace()
        await self._start_app_faces()
        await self._start_board_faces()
        if cfg["retained"]:
            from pubmote.gateway.retained import from_config

            self.retained = await from_config(self.hub, cfg)
        from pubmote.gateway.mesh.relay import from_config as mesh_from_config

        self.mesh = await mesh_from_config(self.hub, cfg)
        await self._start_control()

    def _set_link_guard(self) -> None:
        cfg = self.cfg
        require_tls = board_links_encrypted(cfg)
        if cfg["tcp_tls_cert"]:
            ctx = server_context(str(cfg["tcp_tls_cert"]), str(cfg["tcp_tls_key"]))
            self.link_guard = LinkGuard(ctx, require_tls)
            log.info("TCP board face: TLS with %s; plaintext boards %s", cfg["tcp_tls_cert"],
                     "refused" if require_tls else "accepted too")

    def _set_auth(self) -> None:
        cfg = self.cfg
        keys = load_keys(cfg["keys"]) if cfg["keys"] else {}
        grants = load_grants(cfg["keys"]) if cfg["keys"] else {}
        if self.fleet is not None:
            sims = self.fleet.board_keys()
            clash = sorted(set(sims) & set(keys))
            if clash:
                raise ValueError("--keys %s holds keys for %s, the simulated boards' names: "
                                 "rename those boards or drop --sim-boards" % (
                                     cfg["keys"], ", ".join(clash)))
            keys.update(sims)
        anonymous = bool(cfg.get("allow_anonymous_boards"))
        # always a policy: a board publishes only as itself, a keyed board only within
        # its grant, a signed realm holds on every ingress
        signed = [ndn_name.from_uri(p) for p in cfg["require_signed"]]
        self.hub.attach(auth=BoardAuth(keys, signed, allow_anonymous=anonymous, grants=grants))
        log.log(logging.WARNING if anonymous else logging.INFO,
                "board authentication: %s; signing required under %s", (
                    "strict: %d boards with keys, boards without one refused (give them a key "
                    "with `pubmote deploy`, or --allow-anonymous-boards)" % len(keys)
                    if not anonymous else "ANONYMOUS BOARDS ALLOWED (--allow-anonymous-boards):"
                    " %d boards with keys; boards WITHOUT a key register by name and publish "
                    "anywhere" % len(keys)),
                ", ".join(cfg["require_signed"]) or "no prefix")

    def _set_journal_and_trace(self) -> None:
        cfg = self.cfg
        if cfg["journal"]:
            self.journal = Journal(cfg["journal"], max_bytes=int(cfg["journal_max_bytes"]),
                                   max_age_s=float(cfg["journal_max_age"]),
                                   fsync=str(cfg["journal_fsync"]),
                                   backlog_records=int(cfg["journal_backlog_records"]),
                                   backlog_bytes=int(cfg["journal_backlog_bytes"]))
            self.journal.open()  # a folder it cannot write is a fault it retries, not an error
            self.hub.attach(journal=self.journal)
            self._tasks.append(asyncio.create_task(self._journal_ticks()))
        if cfg["trace"]:
            self.tracer = Tracer(cfg["trace"])
            self.hub.attach(tracer=self.tracer)

    async def _start_app_faces(self) -> None:
        """The NDN faces and SP endpoints applications connect to."""
        cfg = self.cfg
        lim, hits = self.limits, self.hits
        for url in cfg["ndn_face"]:
            ndn = NdnFaceServer(url, next_face_id, self.hub.on_packet, self.hub.face_state,
                                limits=lim, hits=hits,
                                allow=AllowList(cfg["ndn_allow_from"],
                                                cfg["ndn_allow_prefixes"]))
            await ndn.start()
            self.ndn.append(ndn)
        for url in cfg["sp_pub"]:
            ep = SpEndpoint(self.hub, url, sp.PUB, int(cfg["sp_buffer_bytes"]), limits=lim,
                            hits=hits)
            await ep.start()
            self.sp.append(ep)
        for url in cfg["sp_sub"]:
            ep = SpEndpoint(self.hub, url, sp.SUB, limits=lim, hits=hits,
                            allow=AllowList(cfg["sp_sub_allow_from"],
                                            cfg["sp_sub_allow_topics"]))
            await ep.start()
            self.sp.append(ep)

    async def _start_board_faces(self) -> None:
        """The faces boards connect through: TCP, UDP, serial lines, the simulated fleet."""
        cfg = self.cfg
        lim, hits = self.limits, self.hits
        loop = asyncio.get_running_loop()
        for spec in cfg["tcp"]:
            host, port = parse_hostport(spec)
            log_exposure(log, "the board TCP face", spec, host, "%s; %s" % (
                "TLS with the gateway's certificate" if cfg.get("tcp_tls_cert")
                else "not encrypted (readings and commands in clear)", self._board_trust()))
            listener = StreamListener(host, port, self.hub.on_packet, self._stream_state,
                                      limits=lim, hits=hits, guard=self.link_guard)
            await listener.start()
            self.tcp.append(listener)
        for spec in cfg["udp"]:
            host, port = parse_hostport(spec)
            # UDP is never encrypted here (no DTLS on the gateway): said where it is exposed
            log_exposure(log, "the board UDP face", spec, host,
                         "not encrypted (readings and commands in clear); "
                         + self._board_trust())
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
            if hasattr(self.fleet, "crashed"):
                self._tasks.append(asyncio.create_task(self._watch_fleet()))

    async def _start_control(self) -> None:
        """The local control endpoint `pubmote update` talks to; a bridge that cannot bind
        it runs on without (said once)."""
        from pubmote.gateway.update.control import ControlServer

        control = ControlServer(self.hub, next_face_id())
        try:
            started = await control.start()
        except OSError as e:
            log.warning("control endpoint %s: %s; `pubmote update` cannot reach this bridge",
                        control.path, e.strerror or e)
            started = False
        if started:
            self.control = control
        else:
            control.producer.close()

    def _board_trust(self) -> str:
        """What a board face trusts, for the line that says it is exposed."""
        auth = self.hub.auth
        if auth is None or (auth.allow_anonymous and not auth.keys):
            return "boards register by name, no key needed (--allow-anonymous-boards)"
        if auth.allow_anonymous:
            return ("boards with a key must sign their registration; boards without one "
                    "register by name (--allow-anonymous-boards)")
        return "boards must sign their registration with their key"

    async def _watch_fleet(self) -> None:
        """Ask the fleet each second which boards crashed: it logs each crash as it is
        first seen (with where the board's log is), not only when a status line asks."""
        while True:
            await asyncio.sleep(1.0)
            try:
                self.fleet.crashed()  # type: ignore[union-attr]
            except Exception:  # the watch goes on
                log.exception("checking the simulated boards for crashes failed")

    async def _journal_ticks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if self.journal is not None:
                try:
                    self.journal.tick()
                except Exception:  # the ticks (and the retries) go on
                    log.exception("journal tick failed")

    def _stream_state(self, face: BoardFace) -> None:
        if face.up and face not in self.faces:
            self.faces.append(face)
        elif not face.up and face in self.faces:
            self.faces.remove(face)
            self._rx_errors_gone += face.counters["rx_errors"]
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
        from pubmote.gateway.status import status_line

        return status_line(self)

    def limit_summary(self) -> str:
        """How often each limit (docs/limits.md) was hit, `key n, ...`, or `none`."""
        host = self.mesh.host if self.mesh is not None else None
        mesh = {"mesh_" + k: n for k, n in host.limit_hits.items()} if host is not None else {}
        return self.hits.summary(mesh)

    def internal_errors(self) -> int:
        """Failures of the bridge's own code on some input (a listener, a hook, a packet
        or message handler, a task), each contained where it happened and counted there."""
        c = self.hub.counters
        n = c["listener_errors"] + c["hook_errors"] + c["packet_errors"] + c["task_errors"]
        n += sum(ep.counters["errors"] for ep in self.sp)
        n += sum(int(f.counters.get("rx_errors", 0)) for f in self.all_faces())
        n += self._rx_errors_gone + sum(ndn.rx_errors for ndn in self.ndn)
        if self.retained is not None:
            d: dict[str, int] = self.retained.node.counters
            n += d["rx_failed"] + d["handler_failed"]
        return n

    async def wait(self) -> None:
        """Run until cancelled."""
        await asyncio.Event().wait()

    async def stop(self) -> None:
        """Stop in the order that keeps the promise of an ack (docs/guarantees.md): take
        nothing new in (from any face, SP or the mesh: no more acks), write everything
        acked to the connected SP subscribers (waiting a bounded time for them to take
        it), then close the rest; the journal is closed last, with every record."""
        self.hub.stop_intake()
        self.hub.flush_relays()
        for ep in self.sp:
            await ep.close()
        if self.control is not None:
            await self.control.close()
            self.control = None
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for listener in self.tcp:
            await listener.close()
        for f in self.faces:
            f.close()
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
            self.journal = None
            self.hub.attach(journal=None)
