"""Accepting: an inbound TCP connection admitted under the host's limits (connections,
handshakes pending, connections per source address), upgraded to Noise and Yamux within
handshake_timeout_s; every refusal and failed handshake counted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pubmote.p2p import multistream, noise, yamux
from pubmote.p2p.connmgr import INBOUND, ConnectionManager, InboundGate
from pubmote.p2p.dialer import StartConnection
from pubmote.p2p.errors import LINK_ERRORS, describe
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identity import KeyPair
from pubmote.p2p.transport import RawConn

log = logging.getLogger("pubmote.p2p.host")


class Acceptor:
    """Our inbound connections in the making; `closing()` says the host is stopping."""

    def __init__(self, *, key: KeyPair, config: HostConfig, connections: ConnectionManager,
                 start_connection: StartConnection, closing: Callable[[], bool]) -> None:
        self._key = key
        self._config = config
        self._connections = connections
        self._start_connection = start_connection
        self._closing = closing
        self._gate = InboundGate(config.max_inbound_per_ip)
        self._pending: set[RawConn] = set()
        self.refused = 0          # connections refused by a limit (counted)
        self.failed_handshakes = 0
        # refusals by each limit, and inbound handshakes cut off by handshake_timeout_s
        self.limit_hits = dict.fromkeys(("max_connections", "max_pending_inbound",
                                         "max_inbound_per_ip", "handshake_timeout_s"), 0)

    def abort_pending(self) -> None:
        """Drop every handshake under way (the host is closing)."""
        for raw in list(self._pending):
            raw.abort()

    async def on_raw_inbound(self, raw: RawConn) -> None:
        """Admit, upgrade and hand over one accepted TCP connection; returns when it ends."""
        source = self._gate.source(raw.remote_addr)
        limit = ("max_connections" if not self._connections.has_room() else
                 "max_pending_inbound" if len(self._pending)
                 >= self._config.max_pending_inbound else
                 None if self._gate.admit(source) else "max_inbound_per_ip")
        if limit is not None or self._closing():
            self.refused += 1
            if limit is None:
                self._gate.release(source)
            else:
                self.limit_hits[limit] += 1
            log.info("mesh: refusing inbound connection from %s: %s", raw.remote_addr, limit)
            raw.abort()
            return
        try:  # the address holds its slot from accept until the connection closes
            self._pending.add(raw)
            try:
                secured = await asyncio.wait_for(self._upgrade(raw),
                                                 self._config.handshake_timeout_s)
            except TimeoutError:
                self.limit_hits["handshake_timeout_s"] += 1
                self._handshake_failed(raw, "timed out after %.1f s"
                                       % self._config.handshake_timeout_s)
                return
            except LINK_ERRORS as e:
                self._handshake_failed(raw, describe(e))
                return
            finally:
                self._pending.discard(raw)
            if self._closing():
                raw.abort()
                return
            self._start_connection(secured, raw, INBOUND)
            await raw.wait_closed()
        finally:
            self._gate.release(source)

    def _handshake_failed(self, raw: RawConn, reason: str) -> None:
        self.failed_handshakes += 1
        log.warning("mesh: inbound handshake from %s failed: %s", raw.remote_addr, reason)
        raw.abort()

    async def _upgrade(self, raw: RawConn) -> noise.NoiseSession:
        await multistream.handle(raw, lambda p: p == noise.PROTOCOL_ID)
        secured = await noise.secure_inbound(raw, self._key)
        await multistream.handle(secured, lambda p: p == yamux.PROTOCOL_ID)
        return secured
