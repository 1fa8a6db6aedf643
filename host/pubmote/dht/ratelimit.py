"""Rate limiting of a DHT node's incoming queries: a token bucket per source address."""

from __future__ import annotations

import time
from collections import OrderedDict


class RateLimiter:
    """A token bucket per source IP: `rate_per_s` sustained, `burst` at once. At most
    `max_sources` buckets are kept (least recently seen dropped first)."""

    def __init__(self, rate_per_s: float, burst: float, max_sources: int = 4096) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_sources = max_sources
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()
        self.counters = {"limited": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, ip: str, now: float | None = None) -> bool:
        t = time.monotonic() if now is None else now
        b = self._buckets.get(ip)
        if b is None:
            if len(self._buckets) >= self.max_sources:
                self._buckets.popitem(last=False)
                self.counters["evicted"] += 1
            b = self._buckets[ip] = [self.burst, t]
        else:
            self._buckets.move_to_end(ip)
            b[0] = min(self.burst, b[0] + (t - b[1]) * self.rate_per_s)
            b[1] = t
        if b[0] >= 1.0:
            b[0] -= 1.0
            return True
        self.counters["limited"] += 1
        return False
