# Latency histogram for the board-side bench apps (MicroPython): 10 us buckets up to 50 ms,
# preallocated, so recording a sample allocates nothing on the board's small heap.
from array import array
from time import ticks_diff, ticks_us

_BUCKET_US = 10
_N = 5000


class Hist:
    def __init__(self):
        # 4 bytes a bucket (a list takes 8 on the 64-bit port, in one 40 kB block)
        self.b = array("I", bytes(4 * (_N + 1)))
        self.n = 0

    def add(self, t0):
        us = ticks_diff(ticks_us(), t0)
        i = us // _BUCKET_US
        self.b[i if i < _N else _N] += 1
        self.n += 1

    def pct(self, p):
        want = self.n * p // 100
        seen = 0
        for i in range(_N + 1):
            seen += self.b[i]
            if seen > want:
                return (i * _BUCKET_US + _BUCKET_US // 2) / 1000
        return -1.0

    def report(self, label, ok, failed, seconds):
        print("RESULT %s acked=%d failed=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f"
              % (label, ok, failed, seconds, self.pct(50), self.pct(99)))
