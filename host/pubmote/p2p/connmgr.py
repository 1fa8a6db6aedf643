"""Connection bookkeeping: one connection per peer, connection limits, jittered backoff
after failed dials, and the tie-break when two peers dial each other at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import time
from collections.abc import Callable

from pubmote.p2p.identity import PeerId
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.yamux import Stream, YamuxSession

INBOUND = "inbound"
OUTBOUND = "outbound"


class Connection:
    """A secured, multiplexed connection to one peer."""

    def __init__(self, session: YamuxSession, *, local_peer: PeerId, remote_addr: Multiaddr | None,
                 direction: str, local_addr: Multiaddr | None = None) -> None:
        self.session = session
        self.local_peer = local_peer
        self.peer_id: PeerId = session.remote_peer
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.direction = direction
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def is_closed(self) -> bool:
        return self.session.closed.is_set()

    @property
    def close_reason(self) -> str:
        return self.session.close_reason

    def open_stream(self) -> Stream:
        return self.session.open_stream()

    async def close(self, reason: str = "closed locally") -> None:
        await self.session.close(reason)

    def __repr__(self) -> str:
        return "Connection(%s, %s, %s)" % (self.peer_id, self.direction, self.remote_addr)


class Backoff:
    """Jittered, capped exponential backoff: base * 2^(n-1), times a factor in [0.5, 1.5)."""

    def __init__(self, *, base_s: float = 0.5, cap_s: float = 60.0,
                 rng: Callable[[], float] = random.random) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self._rng = rng

    def delay_s(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        raw = min(self.cap_s, self.base_s * (2 ** min(failures - 1, 30)))
        return float(min(self.cap_s, raw * (0.5 + self._rng())))


class DialBackoff:
    """Per-target memory of failed dials: after a failure, dials wait out the backoff."""

    def __init__(self, backoff: Backoff, *, max_entries: int = 4096) -> None:
        self.backoff = backoff
        self._state: dict[str, tuple[int, float]] = {}  # key -> (failures, retry-at)
        self._max = max_entries

    def remaining_s(self, key: str) -> float:
        st = self._state.get(key)
        if st is None:
            return 0.0
        return max(0.0, st[1] - time.monotonic())

    def failed(self, key: str) -> float:
        failures = self._state.get(key, (0, 0.0))[0] + 1
        delay = self.backoff.delay_s(failures)
        if key not in self._state and len(self._state) >= self._max:
            # Bounded: forget the oldest entry rather than grow.
            self._state.pop(next(iter(self._state)))
        self._state[key] = (failures, time.monotonic() + delay)
        return delay

    def succeeded(self, key: str) -> None:
        self._state.pop(key, None)


class InboundGate:
    """Inbound connections by source address, from accept until closed: at most
    max_per_ip from one IPv4 address or IPv6 /64, so that one host's idle or half-done
    connections cannot take every slot of the listener."""

    def __init__(self, max_per_ip: int) -> None:
        self.max_per_ip = max_per_ip
        self._by_source: dict[str, int] = {}

    @staticmethod
    def source(addr: Multiaddr | None) -> str:
        if addr is None:
            return "?"
        kind, ip = addr.parts[0]
        if kind == "ip6":
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
        return str(ip)

    def admit(self, source: str) -> bool:
        n = self._by_source.get(source, 0)
        if n >= self.max_per_ip:
            return False
        self._by_source[source] = n + 1
        return True

    def release(self, source: str) -> None:
        n = self._by_source.get(source, 0) - 1
        if n > 0:
            self._by_source[source] = n
        else:
            self._by_source.pop(source, None)


class ConnectionManager:
    """The table of live connections, at most one per peer."""

    def __init__(self, local_peer: PeerId, *, max_connections: int = 128) -> None:
        self.local_peer = local_peer
        self.max_connections = max_connections
        self._conns: dict[PeerId, Connection] = {}

    def __len__(self) -> int:
        return len(self._conns)

    def get(self, peer: PeerId) -> Connection | None:
        """The peer's usable connection: not closed, and no go-away from the remote."""
        c = self._conns.get(peer)
        if c is None or c.is_closed or c.session.remote_goaway:
            return None
        return c

    def peers(self) -> list[PeerId]:
        return [p for p, c in self._conns.items() if not c.is_closed]

    def connections(self) -> list[Connection]:
        return [c for c in self._conns.values() if not c.is_closed]

    def has_room(self) -> bool:
        return len(self._conns) < self.max_connections

    def add(self, conn: Connection) -> Connection | None:
        """Register `conn`; return the connection that must be closed (the new one or the
        old one) when the peer already had one, else None.

        Two peers dialing each other at once each end up with two connections; both keep
        the one dialed by the peer with the smaller PeerId, so they agree which survives.
        """
        old = self.get(conn.peer_id)
        if old is None:
            self._conns[conn.peer_id] = conn
            return None
        if old.direction == conn.direction:
            return conn
        winner_dir = OUTBOUND if self.local_peer < conn.peer_id else INBOUND
        if conn.direction == winner_dir:
            self._conns[conn.peer_id] = conn
            return old
        return conn

    def remove(self, conn: Connection) -> bool:
        """Forget `conn`; True when it was the peer's registered connection."""
        if self._conns.get(conn.peer_id) is conn:
            del self._conns[conn.peer_id]
            return True
        return False
