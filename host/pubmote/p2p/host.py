"""The libp2p host: listens and dials over TCP, upgrades connections (multistream-select,
Noise, Yamux), serves registered stream protocols, runs identify and ping, and tells
listeners when peers come and go.

The host keeps the connections and the stream protocols it serves; its parts, each with
its own state, do the rest: dialling (dialer.py), accepting under limits (acceptor.py),
identify (identify_service.py), the peer store (peerstore.py), keepalive (keepalive.py)
and peer events (events.py).

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
from collections.abc import Awaitable, Callable, Sequence

from pubmote.p2p import identify, multistream, noise, ping
from pubmote.p2p.acceptor import Acceptor
from pubmote.p2p.connmgr import OUTBOUND, Connection, ConnectionManager
from pubmote.p2p.dialer import Dialer
from pubmote.p2p.errors import LINK_ERRORS, DialError, ProtocolError, StreamReset
from pubmote.p2p.events import CONNECTED, DISCONNECTED, PeerEvent, PeerEvents
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identify_service import IdentifyService
from pubmote.p2p.identity import KeyPair, PeerId
from pubmote.p2p.keepalive import keepalive
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.peerstore import PeerStore
from pubmote.p2p.transport import RawConn, listen_tcp
from pubmote.p2p.yamux import Stream, YamuxSession

log = logging.getLogger(__name__)

StreamHandler = Callable[[Stream], Awaitable[None]]


class Host:
    """A libp2p node on asyncio. Use as `async with Host(...) as host:`."""

    def __init__(self, key: KeyPair, *, listen_addrs: Sequence[str | Multiaddr] = (),
                 config: HostConfig | None = None) -> None:
        self.key = key
        self.config = c = config or HostConfig()
        self._want_listen = [a if isinstance(a, Multiaddr) else Multiaddr(a)
                             for a in listen_addrs]
        self.listen_addrs: list[Multiaddr] = []
        self.connections = ConnectionManager(key.peer_id, max_connections=c.max_connections)
        self._handlers: dict[str, StreamHandler] = {}
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._events = PeerEvents()
        self._peers = PeerStore(c.max_known_peers)
        self._dialer = Dialer(key=key, config=c, connections=self.connections,
                              peers=self._peers, start_connection=self._start_connection,
                              closing=self._is_closing)
        self._acceptor = Acceptor(key=key, config=c, connections=self.connections,
                                  start_connection=self._start_connection,
                                  closing=self._is_closing)
        self._identify = IdentifyService(
            key=key, config=c, connections=self.connections, peers=self._peers,
            events=self._events, protocols=self.protocols, listen_addrs=self._listening,
            open_stream=self.open_stream_on, spawn=self._spawn, closing=self._is_closing)
        self._handlers[identify.PROTOCOL_ID] = self._identify.handle
        self._handlers[identify.PUSH_PROTOCOL_ID] = self._identify.handle_push
        self._handlers[ping.PROTOCOL_ID] = ping.handle_ping

    def _is_closing(self) -> bool:
        return self._closing

    def _listening(self) -> list[Multiaddr]:
        return self.listen_addrs

    # -- lifetime ------------------------------------------------------------------------
    @property
    def peer_id(self) -> PeerId:
        return self.key.peer_id

    async def start(self) -> None:
        """Listen on the configured addresses (port 0 picks a free port)."""
        for addr in self._want_listen:
            server, bound = await listen_tcp(addr, self._acceptor.on_raw_inbound)
            self._servers.append(server)
            self.listen_addrs.extend(bound)

    async def close(self) -> None:
        """Stop listening, close every connection with go-away, cancel our tasks."""
        self._closing = True
        for s in self._servers:
            s.close()
        self._acceptor.abort_pending()
        self._dialer.cancel()
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

    # -- limits (acceptor.py counts them) ------------------------------------------------
    @property
    def refused_inbound(self) -> int:
        """Inbound connections refused by a limit."""
        return self._acceptor.refused

    @property
    def failed_handshakes(self) -> int:
        """Inbound handshakes that failed or timed out."""
        return self._acceptor.failed_handshakes

    @property
    def limit_hits(self) -> dict[str, int]:
        """Refusals by each limit, and inbound handshakes cut off by handshake_timeout_s."""
        return self._acceptor.limit_hits

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
            self._identify.push_all()

    def remove_stream_handler(self, protocol: str) -> None:
        if self._handlers.pop(protocol, None) is not None:
            self._identify.push_all()

    def protocols(self) -> list[str]:
        return sorted(self._handlers)

    def add_event_handler(self, handler: Callable[[PeerEvent], None]) -> None:
        """Call `handler(event)` (synchronously) on every PeerEvent."""
        self._events.add(handler)

    def remove_event_handler(self, handler: Callable[[PeerEvent], None]) -> None:
        self._events.remove(handler)

    # -- peers ---------------------------------------------------------------------------
    def connected_peers(self) -> list[PeerId]:
        return self.connections.peers()

    def connection(self, peer: PeerId) -> Connection | None:
        return self.connections.get(peer)

    def peer_info(self, peer: PeerId) -> IdentifyInfo | None:
        """What identify told us about `peer` (None before identify finished)."""
        return self._peers.info(peer)

    def add_addrs(self, peer: PeerId, addrs: Sequence[Multiaddr]) -> None:
        """Remember where `peer` listens, for dial_peer/new_stream (bounded store)."""
        self._peers.add_addrs(peer, addrs)

    def addrs(self, peer: PeerId) -> list[Multiaddr]:
        return self._peers.addrs(peer)

    # -- dialing -------------------------------------------------------------------------
    async def connect(self, addr: str | Multiaddr, *, peer_id: PeerId | None = None,
                      timeout_s: float | None = None, attempts: int = 1) -> Connection:
        """Connect to `addr` (its /p2p/ part, or `peer_id`, is the PeerId we require).

        Reuses a live connection to that peer; concurrent calls share one dial. Retries
        up to `attempts` times with jittered backoff; after a failure, dials to the same
        target fail fast until the backoff has passed. Raises DialError.
        """
        return await self._dialer.connect(addr, peer_id=peer_id, timeout_s=timeout_s,
                                          attempts=attempts)

    async def dial_peer(self, peer: PeerId, *, timeout_s: float | None = None) -> Connection:
        """Connect to `peer` through the addresses we know for it."""
        return await self._dialer.dial_peer(peer, timeout_s=timeout_s)

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
        self._events.emit(PeerEvent(CONNECTED, conn.peer_id, conn))
        if self.config.identify_on_connect:
            self._spawn(self._identify.on_connect(conn), conn.tasks)
        if self.config.keepalive_interval_s > 0:
            self._spawn(keepalive(conn, self.config.keepalive_interval_s,
                                  self.config.keepalive_timeout_s, self._spawn), conn.tasks)
        return conn

    async def _run_connection(self, conn: Connection) -> None:
        try:
            await conn.session.run()
        finally:
            registered = self.connections.remove(conn)
            for t in list(conn.tasks):
                t.cancel()
            if registered:
                self._events.emit(PeerEvent(DISCONNECTED, conn.peer_id, conn))

    async def _serve_stream(self, conn: Connection, st: Stream) -> None:
        try:
            proto = await asyncio.wait_for(multistream.handle(st, self._handlers.__contains__),
                                           self.config.negotiate_timeout_s)
        except LINK_ERRORS as e:
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
        return self._identify.advertised_addrs(conn)

    async def identify(self, peer: PeerId) -> IdentifyInfo:
        """Ask `peer` who it is; the answer is also kept (see peer_info)."""
        return await self._identify.identify(peer)

    async def ping(self, peer: PeerId, count: int = 1) -> list[float]:
        """`count` /ipfs/ping/1.0.0 round trips to `peer`, in seconds."""
        st = await self.new_stream(peer, [ping.PROTOCOL_ID])
        try:
            return await ping.ping_rounds(st, count)
        finally:
            await st.close()
