"""The libp2p host: listens and dials over TCP, upgrades connections (multistream-select,
Noise, Yamux), serves registered stream protocols, runs identify and ping, and tells
listeners when peers come and go.

This is what GossipSub builds on:

    host = Host(key, listen_addrs=["/ip4/0.0.0.0/tcp/4001"])
    host.set_stream_handler("/meshsub/1.1.0", handle)     # async def handle(stream)
    host.add_event_handler(on_event)                      # PeerEvent: connected/identified/...
    async with host:
        await host.connect("/ip4/1.2.3.4/tcp/4001/p2p/12D3KooW...")
        stream = await host.new_stream(peer_id, ["/meshsub/1.1.0"])
        await stream.write_lp(rpc_bytes); reply = await stream.read_lp(max_len)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from pubmote.p2p import identify, multistream, noise, ping, yamux
from pubmote.p2p.connmgr import (
    INBOUND,
    OUTBOUND,
    Connection,
    ConnectionManager,
    DialBackoff,
    InboundGate,
)
from pubmote.p2p.errors import DialError, HandshakeError, MeshError, ProtocolError, StreamReset
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identity import KeyPair, PeerId
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.transport import RawConn, dial_tcp, listen_tcp
from pubmote.p2p.yamux import Stream, YamuxSession

log = logging.getLogger(__name__)

StreamHandler = Callable[[Stream], Awaitable[None]]

# What a failing handshake or negotiation may raise; each becomes a logged reason.
_LINK_ERRORS = (ProtocolError, MeshError, asyncio.IncompleteReadError, ConnectionError, OSError,
                asyncio.TimeoutError)

CONNECTED = "connected"
IDENTIFIED = "identified"
DISCONNECTED = "disconnected"


def describe(e: BaseException) -> str:
    """A short, loggable reason for a failed link."""
    if isinstance(e, asyncio.IncompleteReadError):
        return "remote closed the connection (wanted %d bytes, got %d)" % (
            e.expected or 0, len(e.partial))
    text = str(e)
    return "%s: %s" % (e.__class__.__name__, text) if text else e.__class__.__name__


class PeerEvent:
    """A change in our connections: kind is CONNECTED, IDENTIFIED or DISCONNECTED."""

    __slots__ = ("kind", "peer_id", "connection", "info")

    def __init__(self, kind: str, peer_id: PeerId, connection: Connection,
                 info: IdentifyInfo | None = None) -> None:
        self.kind = kind
        self.peer_id = peer_id
        self.connection = connection
        self.info = info

    def __repr__(self) -> str:
        return "PeerEvent(%s, %s)" % (self.kind, self.peer_id)


class Host:
    """A libp2p node on asyncio. Use as `async with Host(...) as host:`."""

    def __init__(self, key: KeyPair, *, listen_addrs: Sequence[str | Multiaddr] = (),
                 config: HostConfig | None = None) -> None:
        self.key = key
        self.config = config or HostConfig()
        self._want_listen = [a if isinstance(a, Multiaddr) else Multiaddr(a)
                             for a in listen_addrs]
        self.listen_addrs: list[Multiaddr] = []
        self.connections = ConnectionManager(key.peer_id,
                                             max_connections=self.config.max_connections)
        self._backoff = DialBackoff(self.config.backoff)
        self._handlers: dict[str, StreamHandler] = {}
        self._event_handlers: list[Callable[[PeerEvent], None]] = []
        self._servers: list[asyncio.Server] = []
        self._dials: dict[str, asyncio.Task[Connection]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending_inbound: set[RawConn] = set()
        self._peer_info: OrderedDict[PeerId, IdentifyInfo] = OrderedDict()
        self._peer_addrs: OrderedDict[PeerId, list[Multiaddr]] = OrderedDict()
        self._closing = False
        self.refused_inbound = 0          # connections refused by a limit (counted)
        self.failed_handshakes = 0
        self._inbound = InboundGate(self.config.max_inbound_per_ip)
        # refusals by each limit, and inbound handshakes cut off by handshake_timeout_s
        self.limit_hits = dict.fromkeys(("max_connections", "max_pending_inbound",
                                         "max_inbound_per_ip", "handshake_timeout_s"), 0)
        self._handlers[identify.PROTOCOL_ID] = self._handle_identify
        self._handlers[identify.PUSH_PROTOCOL_ID] = self._handle_identify_push
        self._handlers[ping.PROTOCOL_ID] = ping.handle_ping

    # -- lifetime ------------------------------------------------------------------------
    @property
    def peer_id(self) -> PeerId:
        return self.key.peer_id

    async def start(self) -> None:
        """Listen on the configured addresses (port 0 picks a free port)."""
        for addr in self._want_listen:
            server, bound = await listen_tcp(addr, self._on_raw_inbound)
            self._servers.append(server)
            self.listen_addrs.extend(bound)

    async def close(self) -> None:
        """Stop listening, close every connection with go-away, cancel our tasks."""
        self._closing = True
        for s in self._servers:
            s.close()
        for raw in list(self._pending_inbound):
            raw.abort()
        for dial in list(self._dials.values()):
            dial.cancel()
        conns = self.connections.connections()
        await asyncio.gather(*(c.close("host closing") for c in conns), return_exceptions=True)
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5.0)
        for s in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(s.wait_closed(), 1.0)
        self._servers.clear()

    async def __aenter__(self) -> Host:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _spawn(self, coro: Awaitable[None], owner: set[asyncio.Task[None]] | None = None) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if owner is not None:
            owner.add(task)
            task.add_done_callback(owner.discard)

    # -- protocols and events ------------------------------------------------------------
    def set_stream_handler(self, protocol: str, handler: StreamHandler) -> None:
        """Serve `protocol`: `handler(stream)` runs for each inbound stream that chose it.

        The handler owns the stream; when it returns, the stream is half-closed if the
        handler did not close it; an exception resets it. Connected peers that take
        identify pushes are told about the new protocol.
        """
        new = protocol not in self._handlers
        self._handlers[protocol] = handler
        if new:
            self._push_identify_all()

    def remove_stream_handler(self, protocol: str) -> None:
        if self._handlers.pop(protocol, None) is not None:
            self._push_identify_all()

    def protocols(self) -> list[str]:
        return sorted(self._handlers)

    def add_event_handler(self, handler: Callable[[PeerEvent], None]) -> None:
        """Call `handler(event)` (synchronously) on every PeerEvent."""
        self._event_handlers.append(handler)

    def remove_event_handler(self, handler: Callable[[PeerEvent], None]) -> None:
        with contextlib.suppress(ValueError):
            self._event_handlers.remove(handler)

    def _emit(self, event: PeerEvent) -> None:
        for h in list(self._event_handlers):
            try:
                h(event)
            except Exception:
                log.exception("mesh: event handler failed on %r", event)

    # -- peers ---------------------------------------------------------------------------
    def connected_peers(self) -> list[PeerId]:
        return self.connections.peers()

    def connection(self, peer: PeerId) -> Connection | None:
        return self.connections.get(peer)

    def peer_info(self, peer: PeerId) -> IdentifyInfo | None:
        """What identify told us about `peer` (None before identify finished)."""
        return self._peer_info.get(peer)

    def add_addrs(self, peer: PeerId, addrs: Sequence[Multiaddr]) -> None:
        """Remember where `peer` listens, for dial_peer/new_stream (bounded store)."""
        known = self._peer_addrs.pop(peer, [])
        for a in addrs:
            a = a.without_p2p()
            if a not in known:
                known.append(a)
        self._peer_addrs[peer] = known[-16:]
        while len(self._peer_addrs) > self.config.max_known_peers:
            self._peer_addrs.popitem(last=False)

    def addrs(self, peer: PeerId) -> list[Multiaddr]:
        return list(self._peer_addrs.get(peer, []))

    # -- dialing -------------------------------------------------------------------------
    async def connect(self, addr: str | Multiaddr, *, peer_id: PeerId | None = None,
                      timeout_s: float | None = None, attempts: int = 1) -> Connection:
        """Connect to `addr` (its /p2p/ part, or `peer_id`, is the PeerId we require).

        Reuses a live connection to that peer; concurrent calls share one dial. Retries
        up to `attempts` times with jittered backoff; after a failure, dials to the same
        target fail fast until the backoff has passed. Raises DialError.
        """
        ma = addr if isinstance(addr, Multiaddr) else Multiaddr(addr)
        p2p = ma.peer_id_text()
        if p2p is not None:
            in_addr = PeerId.from_base58(p2p)
            if peer_id is not None and peer_id != in_addr:
                raise ValueError("peer_id differs from the address's /p2p/ part")
            peer_id = in_addr
        if peer_id is not None:
            existing = self.connections.get(peer_id)
            if existing is not None:
                return existing
            if peer_id == self.peer_id:
                raise DialError("refusing to dial ourselves")
        key = str(peer_id) if peer_id is not None else str(ma)
        task = self._dials.get(key)
        if task is None:
            task = asyncio.ensure_future(self._dial(ma.without_p2p(), peer_id, key,
                                                    timeout_s or self.config.dial_timeout_s,
                                                    attempts))
            self._dials[key] = task
            task.add_done_callback(self._dial_done)
        return await asyncio.shield(task)

    def _dial_done(self, task: asyncio.Task[Connection]) -> None:
        for k, t in list(self._dials.items()):
            if t is task:
                del self._dials[k]
        # Callers that gave up (timeout, cancel) leave the outcome unread: read it here so
        # asyncio does not report it as lost.
        if not task.cancelled():
            task.exception()

    async def dial_peer(self, peer: PeerId, *, timeout_s: float | None = None) -> Connection:
        """Connect to `peer` through the addresses we know for it."""
        existing = self.connections.get(peer)
        if existing is not None:
            return existing
        addrs = self.addrs(peer)
        if not addrs:
            raise DialError("no known address for %s" % peer)
        errors = []
        for a in addrs:
            try:
                return await self.connect(a, peer_id=peer, timeout_s=timeout_s)
            except DialError as e:
                errors.append(str(e))
        raise DialError("could not reach %s: %s" % (peer, "; ".join(errors)))

    async def _dial(self, ma: Multiaddr, peer: PeerId | None, key: str, timeout_s: float,
                    attempts: int) -> Connection:
        if self._closing:
            raise DialError("host is closing")
        wait = self._backoff.remaining_s(key)
        if wait > 0:
            raise DialError("dial %s: backing off for another %.1f s" % (key, wait))
        last = ""
        for attempt in range(max(1, attempts)):
            if attempt:
                await asyncio.sleep(self.config.backoff.delay_s(attempt))
            try:
                conn = await asyncio.wait_for(self._dial_once(ma, peer), timeout_s)
            except TimeoutError:
                last = "timed out after %.1f s" % timeout_s
            except HandshakeError as e:
                last = str(e)
                break  # a wrong key or bad signature does not get better by retrying
            except _LINK_ERRORS as e:
                last = describe(e)
            else:
                self._backoff.succeeded(key)
                return conn
        delay = self._backoff.failed(key)
        log.info("mesh: dial %s failed (%s); backing off %.1f s", ma, last, delay)
        raise DialError("dial %s failed: %s" % (ma, last))

    async def _dial_once(self, ma: Multiaddr, peer: PeerId | None) -> Connection:
        if not self.connections.has_room():
            raise DialError("connection limit of %d reached" % self.config.max_connections)
        raw = await dial_tcp(ma)
        try:
            await multistream.select(raw, [noise.PROTOCOL_ID])
            secured = await noise.secure_outbound(raw, self.key, peer)
            await multistream.select(secured, [yamux.PROTOCOL_ID])
        except BaseException:
            raw.abort()
            raise
        if self._closing:
            raw.abort()
            raise DialError("host is closing")
        return self._start_connection(secured, raw, OUTBOUND)

    # -- accepting -----------------------------------------------------------------------
    async def _on_raw_inbound(self, raw: RawConn) -> None:
        source = self._inbound.source(raw.remote_addr)
        limit = ("max_connections" if not self.connections.has_room() else
                 "max_pending_inbound" if len(self._pending_inbound)
                 >= self.config.max_pending_inbound else
                 None if self._inbound.admit(source) else "max_inbound_per_ip")
        if limit is not None or self._closing:
            self.refused_inbound += 1
            if limit is None:
                self._inbound.release(source)
            else:
                self.limit_hits[limit] += 1
            log.info("mesh: refusing inbound connection from %s: %s", raw.remote_addr, limit)
            raw.abort()
            return
        try:  # the address holds its slot from accept until the connection closes
            self._pending_inbound.add(raw)
            try:
                secured = await asyncio.wait_for(self._upgrade_inbound(raw),
                                                 self.config.handshake_timeout_s)
            except TimeoutError:
                self.limit_hits["handshake_timeout_s"] += 1
                self._handshake_failed(raw, "timed out after %.1f s"
                                       % self.config.handshake_timeout_s)
                return
            except _LINK_ERRORS as e:
                self._handshake_failed(raw, describe(e))
                return
            finally:
                self._pending_inbound.discard(raw)
            if self._closing:
                raw.abort()
                return
            self._start_connection(secured, raw, INBOUND)
            await raw.wait_closed()
        finally:
            self._inbound.release(source)

    def _handshake_failed(self, raw: RawConn, reason: str) -> None:
        self.failed_handshakes += 1
        log.warning("mesh: inbound handshake from %s failed: %s", raw.remote_addr, reason)
        raw.abort()

    async def _upgrade_inbound(self, raw: RawConn) -> noise.NoiseSession:
        await multistream.handle(raw, lambda p: p == noise.PROTOCOL_ID)
        secured = await noise.secure_inbound(raw, self.key)
        await multistream.handle(secured, lambda p: p == yamux.PROTOCOL_ID)
        return secured

    # -- connections ---------------------------------------------------------------------
    def _start_connection(self, secured: noise.NoiseSession, raw: RawConn,
                          direction: str) -> Connection:
        session = YamuxSession(secured, is_client=direction == OUTBOUND,
                               on_stream=lambda st: None, config=self.config.yamux_config)
        conn = Connection(session, local_peer=self.peer_id, remote_addr=raw.remote_addr,
                          direction=direction, local_addr=raw.local_addr)
        session.set_stream_handler(
            lambda st: self._spawn(self._serve_stream(conn, st), conn.tasks))
        loser = self.connections.add(conn)
        if loser is conn:
            # Keep the connection we already had; this one goes (go-away, then close).
            kept = self.connections.get(conn.peer_id)
            self._spawn(conn.close("duplicate connection"))
            assert kept is not None
            return kept
        if loser is not None:
            self._spawn(loser.close("duplicate connection"))
        self._spawn(self._run_connection(conn))
        log.debug("mesh: %s connection to %s (%s)", direction, conn.peer_id, conn.remote_addr)
        self._emit(PeerEvent(CONNECTED, conn.peer_id, conn))
        if self.config.identify_on_connect:
            self._spawn(self._identify_on_connect(conn), conn.tasks)
        if self.config.keepalive_interval_s > 0:
            self._spawn(self._keepalive(conn), conn.tasks)
        return conn

    async def _keepalive(self, conn: Connection) -> None:
        while not conn.is_closed:
            await asyncio.sleep(self.config.keepalive_interval_s)
            try:
                await conn.session.ping(self.config.keepalive_timeout_s)
            except (TimeoutError, MeshError):
                if not conn.is_closed:
                    log.warning("mesh: %s stopped answering pings; closing", conn.peer_id)
                    self._spawn(conn.close("keepalive ping timed out"))
                return

    async def _run_connection(self, conn: Connection) -> None:
        try:
            await conn.session.run()
        finally:
            registered = self.connections.remove(conn)
            for t in list(conn.tasks):
                t.cancel()
            if registered:
                self._emit(PeerEvent(DISCONNECTED, conn.peer_id, conn))

    async def _serve_stream(self, conn: Connection, st: Stream) -> None:
        try:
            proto = await asyncio.wait_for(multistream.handle(st, self._handlers.__contains__),
                                           self.config.negotiate_timeout_s)
        except _LINK_ERRORS as e:
            log.debug("mesh: inbound stream from %s not negotiated: %s", conn.peer_id, e)
            st.reset()
            return
        st.protocol = proto
        handler = self._handlers.get(proto)
        if handler is None:
            st.reset()
            return
        try:
            await handler(st)
            if not st.local_closed and not st.reset_reason:
                await st.close()
        except (StreamReset, asyncio.IncompleteReadError, ConnectionError) as e:
            log.debug("mesh: %s stream from %s ended: %s", proto, conn.peer_id, e)
            st.reset()
        except ProtocolError as e:
            log.info("mesh: %s stream from %s: %s", proto, conn.peer_id, e)
            st.reset()
        except Exception:
            log.exception("mesh: handler for %s failed", proto)
            st.reset()

    # -- streams -------------------------------------------------------------------------
    async def new_stream(self, peer: PeerId, protocols: Sequence[str], *,
                         dial: bool = True) -> Stream:
        """Open a stream to `peer` speaking the first of `protocols` it supports.

        Dials through known addresses when not connected (and `dial`). Raises DialError,
        NegotiationError (no common protocol) or StreamReset.
        """
        conn = self.connections.get(peer)
        if conn is None:
            if not dial:
                raise DialError("not connected to %s" % peer)
            conn = await self.dial_peer(peer)
        return await self.open_stream_on(conn, protocols)

    async def open_stream_on(self, conn: Connection, protocols: Sequence[str]) -> Stream:
        st = conn.open_stream()
        try:
            st.protocol = await asyncio.wait_for(multistream.select(st, list(protocols)),
                                                 self.config.negotiate_timeout_s)
        except asyncio.IncompleteReadError:
            st.reset()
            raise StreamReset("stream closed during negotiation") from None
        except BaseException:
            st.reset()
            raise
        return st

    # -- identify and ping ---------------------------------------------------------------
    def advertised_addrs(self, conn: Connection | None = None) -> list[Multiaddr]:
        """Our listen addresses as peers can dial them: an unspecified address (0.0.0.0,
        ::) becomes the local address `conn` reached us on."""
        out: list[Multiaddr] = []
        for a in self.listen_addrs:
            name, ip = a.parts[0]
            if ip in ("0.0.0.0", "::"):
                local = conn.local_addr if conn is not None else None
                if local is None or local.parts[0][0] != name:
                    continue
                a = Multiaddr([local.parts[0]] + a.parts[1:])
            if a not in out:
                out.append(a)
        return out

    def _our_identify(self, conn: Connection) -> IdentifyInfo:
        return IdentifyInfo(public_key=self.key.public, listen_addrs=self.advertised_addrs(conn),
                            protocols=self.protocols(), observed_addr=conn.remote_addr,
                            protocol_version=identify.PROTOCOL_VERSION,
                            agent_version=self.config.agent_version)

    async def _handle_identify(self, st: Stream) -> None:
        conn = self.connections.get(st.session.remote_peer)
        if conn is None or conn.session is not st.session:
            conn = next((c for c in self.connections.connections() if c.session is st.session),
                        None)
        info = self._our_identify(conn) if conn is not None else IdentifyInfo(
            public_key=self.key.public, protocols=self.protocols(),
            protocol_version=identify.PROTOCOL_VERSION, agent_version=self.config.agent_version)
        await st.write(identify.frame(info))
        await st.close()

    async def _handle_identify_push(self, st: Stream) -> None:
        data = await asyncio.wait_for(st.read_until_eof(identify.MAX_MESSAGE),
                                      self.config.identify_timeout_s)
        body = identify.body_of(data)
        push = IdentifyInfo.decode(body)
        peer = st.remote_peer
        if push.public_key is not None and not peer.matches(push.public_key):
            raise ProtocolError("identify push: key does not match PeerId %s" % peer)
        info = identify.merge(self._peer_info.get(peer), push, body)
        self._remember(peer, info)
        conn = self.connections.get(peer)
        if conn is not None:
            self._emit(PeerEvent(IDENTIFIED, peer, conn, info))

    def _push_identify_all(self) -> None:
        """Tell connected peers that take pushes about our changed protocols."""
        if self._closing:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not started yet: identify on connect will carry them
        for conn in self.connections.connections():
            info = self._peer_info.get(conn.peer_id)
            if info is not None and identify.PUSH_PROTOCOL_ID in info.protocols:
                self._spawn(self._push_identify(conn), conn.tasks)

    async def _push_identify(self, conn: Connection) -> None:
        try:
            st = await self.open_stream_on(conn, [identify.PUSH_PROTOCOL_ID])
            await st.write(identify.frame(self._our_identify(conn)))
            await st.close()
        except (*_LINK_ERRORS, StreamReset) as e:
            log.debug("mesh: identify push to %s failed: %s", conn.peer_id, describe(e))

    def _remember(self, peer: PeerId, info: IdentifyInfo) -> None:
        self._peer_info[peer] = info
        self._peer_info.move_to_end(peer)
        while len(self._peer_info) > self.config.max_known_peers:
            self._peer_info.popitem(last=False)
        self.add_addrs(peer, info.listen_addrs)

    async def identify(self, peer: PeerId) -> IdentifyInfo:
        """Ask `peer` who it is; the answer is also kept (see peer_info)."""
        conn = self.connections.get(peer)
        if conn is None:
            raise DialError("not connected to %s" % peer)
        return await self._identify_conn(conn)

    async def _identify_conn(self, conn: Connection) -> IdentifyInfo:
        st = await self.open_stream_on(conn, [identify.PROTOCOL_ID])
        try:
            data = await asyncio.wait_for(st.read_until_eof(identify.MAX_MESSAGE),
                                          self.config.identify_timeout_s)
        finally:
            await st.close()
        info = identify.unframe(data)
        if info.public_key is not None and not conn.peer_id.matches(info.public_key):
            raise ProtocolError("identify: key does not match PeerId %s" % conn.peer_id)
        self._remember(conn.peer_id, info)
        return info

    async def _identify_on_connect(self, conn: Connection) -> None:
        try:
            info = await self._identify_conn(conn)
        except (*_LINK_ERRORS, StreamReset) as e:
            log.info("mesh: identify of %s failed: %s", conn.peer_id, e)
            return
        self._emit(PeerEvent(IDENTIFIED, conn.peer_id, conn, info))

    async def ping(self, peer: PeerId, count: int = 1) -> list[float]:
        """`count` /ipfs/ping/1.0.0 round trips to `peer`, in seconds."""
        st = await self.new_stream(peer, [ping.PROTOCOL_ID])
        try:
            return await ping.ping_rounds(st, count)
        finally:
            await st.close()
