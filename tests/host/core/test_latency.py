"""The bridge-added latency histogram (core/latency.py): percentiles from 10 us buckets,
samples past 100 ms kept in the last bucket, none lost."""

from __future__ import annotations

from pytest import approx

from pubmote.core.latency import LatencyHist


def test_percentiles() -> None:
    h = LatencyHist()
    assert h.percentile_ms(50) == -1.0 and h.summary() == "no samples"
    now = 100.0
    h.add_since(now, [now - 0.000105] * 98 + [now - 0.0031, now - 0.5])  # 105 us x98, 3.1 ms, 0.5 s
    assert h.n == 100
    assert h.percentile_ms(50) == approx(0.105)  # the 100-110 us bucket's middle
    assert h.percentile_ms(99) == approx(3.105)
    assert h.percentile_ms(100) == approx(100.005)  # the overflow bucket: 100 ms or more
    assert h.summary() == "p50 %.2f ms, p99 %.2f ms over 100 messages" % (
        h.percentile_ms(50), h.percentile_ms(99))


def test_clock_steps_back() -> None:
    h = LatencyHist()
    h.add_since(10.0, [10.5])  # a wall clock stepped back: counted, as no time at all
    assert h.n == 1 and h.percentile_ms(50) == approx(0.005)
