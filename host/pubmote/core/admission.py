"""Who may hold a connection (or a UDP address slot) on one listener: at most `max_total`
at once, and at most `max_per_ip` from one source address, so that one host cannot take a
listener's every slot (mosquitto's max_connections, libp2p's per-IP connection limits).
An IPv6 peer counts by its /64: one host has a whole /64 to pick addresses from."""

from __future__ import annotations

import ipaddress
from typing import Any

from pubmote.core.limits import LimitHits


def source_of(peername: Any) -> str | None:
    """The address a peer is counted under: an IPv4 address, an IPv6 /64 (IPv4-mapped
    IPv6 addresses as IPv4), or None for a peer without one (a unix socket)."""
    if not isinstance(peername, tuple) or not peername:
        return None
    try:
        ip = ipaddress.ip_address(str(peername[0]).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class Admission:
    """The slots of one listener. `admit(source)` takes one (False, counted, when the
    listener or that source is full); `release(source)` gives it back."""

    def __init__(self, label: str, *, max_total: int, max_per_ip: int, hits: LimitHits,
                 total_key: str, per_ip_key: str) -> None:
        self.label = label
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.hits = hits
        self.total_key = total_key
        self.per_ip_key = per_ip_key
        self.held = 0
        self.refused = 0  # connections turned away by either cap
        self._by_source: dict[str, int] = {}  # at most max_total keys

    def admit(self, source: str | None) -> bool:
        if self.held >= self.max_total:
            self.hits.hit(self.total_key, "%s refused %s: %d connections held", self.label,
                          source or "a local peer", self.held)
            self.refused += 1
            return False
        if source is not None:
            n = self._by_source.get(source, 0)
            if n >= self.max_per_ip:
                self.hits.hit(self.per_ip_key, "%s refused %s: it holds %d already",
                              self.label, source, n)
                self.refused += 1
                return False
            self._by_source[source] = n + 1
        self.held += 1
        return True

    def release(self, source: str | None) -> None:
        self.held = max(0, self.held - 1)
        if source is not None:
            n = self._by_source.get(source, 0) - 1
            if n > 0:
                self._by_source[source] = n
            else:
                self._by_source.pop(source, None)

    def from_source(self, source: str | None) -> int:
        """How many slots `source` holds."""
        return self._by_source.get(source, 0) if source is not None else 0
