"""Dialling: a TCP connection to a peer's address upgraded to Noise and Yamux, one dial
per target however many callers ask, retried with jittered backoff, and failing fast
while a target is backing off."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pubmote.p2p import multistream, noise, yamux
from pubmote.p2p.connmgr import OUTBOUND, Connection, ConnectionManager, DialBackoff
from pubmote.p2p.errors import LINK_ERRORS, DialError, HandshakeError, describe
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identity import KeyPair, PeerId
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.peerstore import PeerStore
from pubmote.p2p.transport import RawConn, dial_tcp

log = logging.getLogger("pubmote.p2p.host")

# takes an upgraded outbound link over as a connection (the host's connection table)
StartConnection = Callable[[noise.NoiseSession, RawConn, str], Connection]


class Dialer:
    """Our outbound connections in the making; `closing()` says the host is stopping."""

    def __init__(self, *, key: KeyPair, config: HostConfig, connections: ConnectionManager,
                 peers: PeerStore, start_connection: StartConnection,
                 closing: Callable[[], bool]) -> None:
        self._key = key
        self._config = config
        self._connections = connections
        self._peers = peers
        self._start_connection = start_connection
        self._closing = closing
        self._backoff = DialBackoff(config.backoff)
        self._dials: dict[str, asyncio.Task[Connection]] = {}

    def cancel(self) -> None:
        """Cancel every dial under way (the host is closing)."""
        for dial in list(self._dials.values()):
            dial.cancel()

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
            existing = self._connections.get(peer_id)
            if existing is not None:
                return existing
            if peer_id == self._key.peer_id:
                raise DialError("refusing to dial ourselves")
        key = str(peer_id) if peer_id is not None else str(ma)
        task = self._dials.get(key)
        if task is None:
            task = asyncio.ensure_future(self._dial(ma.without_p2p(), peer_id, key,
                                                    timeout_s or self._config.dial_timeout_s,
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
        existing = self._connections.get(peer)
        if existing is not None:
            return existing
        addrs = self._peers.addrs(peer)
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
        if self._closing():
            raise DialError("host is closing")
        wait = self._backoff.remaining_s(key)
        if wait > 0:
            raise DialError("dial %s: backing off for another %.1f s" % (key, wait))
        last = ""
        for attempt in range(max(1, attempts)):
            if attempt:
                await asyncio.sleep(self._config.backoff.delay_s(attempt))
            try:
                conn = await asyncio.wait_for(self._dial_once(ma, peer), timeout_s)
            except TimeoutError:
                last = "timed out after %.1f s" % timeout_s
            except HandshakeError as e:
                last = str(e)
                break  # a wrong key or bad signature does not get better by retrying
            except LINK_ERRORS as e:
                last = describe(e)
            else:
                self._backoff.succeeded(key)
                return conn
        delay = self._backoff.failed(key)
        log.info("mesh: dial %s failed (%s); backing off %.1f s", ma, last, delay)
        raise DialError("dial %s failed: %s" % (ma, last))

    async def _dial_once(self, ma: Multiaddr, peer: PeerId | None) -> Connection:
        if not self._connections.has_room():
            raise DialError("connection limit of %d reached" % self._config.max_connections)
        raw = await dial_tcp(ma)
        try:
            await multistream.select(raw, [noise.PROTOCOL_ID])
            secured = await noise.secure_outbound(raw, self._key, peer)
            await multistream.select(secured, [yamux.PROTOCOL_ID])
        except BaseException:
            raw.abort()
            raise
        if self._closing():
            raw.abort()
            raise DialError("host is closing")
        return self._start_connection(secured, raw, OUTBOUND)
