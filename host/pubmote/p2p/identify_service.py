"""Identify (/ipfs/id/1.0.0) and identify push on a host: we answer who we are (key, the
addresses peers can dial us on, our protocols), ask each new peer the same, keep what it
says in the peer store, and push our protocols to peers that take pushes when they change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from pubmote.p2p import identify
from pubmote.p2p.connmgr import Connection, ConnectionManager
from pubmote.p2p.errors import LINK_ERRORS, DialError, ProtocolError, StreamReset, describe
from pubmote.p2p.events import IDENTIFIED, PeerEvent, PeerEvents
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identity import KeyPair, PeerId
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.peerstore import PeerStore
from pubmote.p2p.yamux import Stream

log = logging.getLogger("pubmote.p2p.host")

OpenStream = Callable[[Connection, Sequence[str]], Awaitable[Stream]]
Spawn = Callable[[Awaitable[None], "set[asyncio.Task[None]] | None"], None]


class IdentifyService:
    """Identify for one host. What it needs of the host comes as callables: its protocols,
    its listen addresses, opening a stream, starting a task, whether it is closing."""

    def __init__(self, *, key: KeyPair, config: HostConfig, connections: ConnectionManager,
                 peers: PeerStore, events: PeerEvents, protocols: Callable[[], list[str]],
                 listen_addrs: Callable[[], list[Multiaddr]], open_stream: OpenStream,
                 spawn: Spawn, closing: Callable[[], bool]) -> None:
        self._key = key
        self._config = config
        self._connections = connections
        self._peers = peers
        self._events = events
        self._protocols = protocols
        self._listen_addrs = listen_addrs
        self._open_stream = open_stream
        self._spawn = spawn
        self._closing = closing

    def advertised_addrs(self, conn: Connection | None = None) -> list[Multiaddr]:
        """Our listen addresses as peers can dial them: an unspecified address (0.0.0.0,
        ::) becomes the local address `conn` reached us on."""
        out: list[Multiaddr] = []
        for listen in self._listen_addrs():
            a = listen
            name, ip = a.parts[0]
            if ip in ("0.0.0.0", "::"):
                local = conn.local_addr if conn is not None else None
                if local is None or local.parts[0][0] != name:
                    continue
                a = Multiaddr([local.parts[0], *a.parts[1:]])
            if a not in out:
                out.append(a)
        return out

    def _ours(self, conn: Connection) -> IdentifyInfo:
        return IdentifyInfo(public_key=self._key.public, listen_addrs=self.advertised_addrs(conn),
                            protocols=self._protocols(), observed_addr=conn.remote_addr,
                            protocol_version=identify.PROTOCOL_VERSION,
                            agent_version=self._config.agent_version)

    async def handle(self, st: Stream) -> None:
        """Answer a peer's identify on its stream."""
        conn = self._connections.get(st.session.remote_peer)
        if conn is None or conn.session is not st.session:
            conn = next((c for c in self._connections.connections()
                         if c.session is st.session), None)
        info = self._ours(conn) if conn is not None else IdentifyInfo(
            public_key=self._key.public, protocols=self._protocols(),
            protocol_version=identify.PROTOCOL_VERSION,
            agent_version=self._config.agent_version)
        await st.write(identify.frame(info))
        await st.close()

    async def handle_push(self, st: Stream) -> None:
        """Take a peer's identify push: merged into what we knew, then an IDENTIFIED event."""
        data = await asyncio.wait_for(st.read_until_eof(identify.MAX_MESSAGE),
                                      self._config.identify_timeout_s)
        body = identify.body_of(data)
        push = IdentifyInfo.decode(body)
        peer = st.remote_peer
        if push.public_key is not None and not peer.matches(push.public_key):
            raise ProtocolError("identify push: key does not match PeerId %s" % peer)
        info = identify.merge(self._peers.info(peer), push, body)
        self._peers.remember(peer, info)
        conn = self._connections.get(peer)
        if conn is not None:
            self._events.emit(PeerEvent(IDENTIFIED, peer, conn, info))

    def push_all(self) -> None:
        """Tell connected peers that take pushes about our changed protocols."""
        if self._closing():
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not started yet: identify on connect will carry them
        for conn in self._connections.connections():
            info = self._peers.info(conn.peer_id)
            if info is not None and identify.PUSH_PROTOCOL_ID in info.protocols:
                self._spawn(self._push(conn), conn.tasks)

    async def _push(self, conn: Connection) -> None:
        try:
            st = await self._open_stream(conn, [identify.PUSH_PROTOCOL_ID])
            await st.write(identify.frame(self._ours(conn)))
            await st.close()
        except (*LINK_ERRORS, StreamReset) as e:
            log.debug("mesh: identify push to %s failed: %s", conn.peer_id, describe(e))

    async def identify(self, peer: PeerId) -> IdentifyInfo:
        """Ask `peer` who it is; the answer is also kept in the peer store."""
        conn = self._connections.get(peer)
        if conn is None:
            raise DialError("not connected to %s" % peer)
        return await self._ask(conn)

    async def _ask(self, conn: Connection) -> IdentifyInfo:
        st = await self._open_stream(conn, [identify.PROTOCOL_ID])
        try:
            data = await asyncio.wait_for(st.read_until_eof(identify.MAX_MESSAGE),
                                          self._config.identify_timeout_s)
        finally:
            await st.close()
        info = identify.unframe(data)
        if info.public_key is not None and not conn.peer_id.matches(info.public_key):
            raise ProtocolError("identify: key does not match PeerId %s" % conn.peer_id)
        self._peers.remember(conn.peer_id, info)
        return info

    async def on_connect(self, conn: Connection) -> None:
        """Identify a new connection's peer, then tell the listeners (IDENTIFIED)."""
        try:
            info = await self._ask(conn)
        except (*LINK_ERRORS, StreamReset) as e:
            log.info("mesh: identify of %s failed: %s", conn.peer_id, e)
            return
        self._events.emit(PeerEvent(IDENTIFIED, conn.peer_id, conn, info))
