"""A latency histogram that costs one list increment per sample: the bridge-added latency
of relayed messages (a face's read of a board's record to the SP subscriber's socket
write), reported in the bridge's status line and by the benches."""

from __future__ import annotations

BUCKET_S = 10e-6  # 10 us buckets
BUCKETS = 10_000  # up to 100 ms; slower samples land in the last bucket


class LatencyHist:
    """Samples in seconds; percentiles in milliseconds (a bucket's middle)."""

    def __init__(self) -> None:
        self.counts = [0] * (BUCKETS + 1)
        self.n = 0

    def add_since(self, now: float, starts: list[float]) -> None:
        """One sample per start time: now - start."""
        counts = self.counts
        for t in starts:
            i = int((now - t) / BUCKET_S)
            counts[i if 0 <= i < BUCKETS else (BUCKETS if i > 0 else 0)] += 1
        self.n += len(starts)

    def percentile_ms(self, p: float) -> float:
        """The p-th percentile (0-100) in ms; -1 without samples."""
        if not self.n:
            return -1.0
        want = self.n * p / 100.0
        seen = 0
        for i, k in enumerate(self.counts):
            seen += k
            if seen >= want and k:
                return (i + 0.5) * BUCKET_S * 1000.0
        return BUCKETS * BUCKET_S * 1000.0

    def summary(self) -> str:
        if not self.n:
            return "no samples"
        return "p50 %.2f ms, p99 %.2f ms over %d messages" % (
            self.percentile_ms(50), self.percentile_ms(99), self.n)
