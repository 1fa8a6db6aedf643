"""The board's clock (firmware clock.py on CPython, with the ports' 2**30 ms ticks): the
gateway's time at the registration's round-trip midpoint, carried by the ticks across their
wrap; a surer sample (shorter round trip) kept over a later worse one until drift makes
the old one worse, a stepped gateway clock taken at once; nothing before the first sync;
days without a sample still tell the time."""

from __future__ import annotations

import pytest

from pubmote_node.clock import Clock, ticks_add

GW = 1_700_000_000_000
WRAP = 1 << 30


def _ms(c: Clock, stamp: int) -> int | None:
    v = c.value(stamp)
    ms = c.ms(stamp)
    if v is None:
        assert ms is None
        return None
    assert int.from_bytes(bytes(v), "big") == ms  # the wire's 8 bytes say the same
    return ms


def test_unsynced_clock_says_so() -> None:
    c = Clock()
    assert not c.synced and _ms(c, 123) is None and c.uncertainty(123) is None


def test_uncertainty_is_half_the_round_trip_grown_by_drift() -> None:
    c = Clock()
    c.sync(GW, 1000, 1040)
    assert c.uncertainty(1020) == 21  # 40 ms round trip: 20 either way, rounded up
    assert c.uncertainty(1020 + 100_000) == 31  # 100 ppm over 100 s
    assert c.uncertainty(1020 - 100_000) == 31  # a stamp before the sync drifts as far
    c.sync(GW + 5000, 6000, 6010)  # a surer sample replaces it
    assert c.uncertainty(6005) == 6


def test_midpoint_and_stamps_before_and_after() -> None:
    c = Clock()
    c.sync(GW, 1000, 1040)  # sent at ticks 1000, answered at 1040: GW is at ticks 1020
    assert c.synced
    assert _ms(c, 1020) == GW
    assert _ms(c, 1520) == GW + 500
    assert _ms(c, 20) == GW - 1000  # a reading taken before the sync gets its time too


def test_across_the_ticks_wrap() -> None:
    c = Clock()
    t0 = WRAP - 100
    c.sync(GW, t0, t0)
    assert _ms(c, ticks_add(t0, 300)) == GW + 300  # ticks 200, after the wrap
    assert _ms(c, t0 - 5000) == GW - 5000
    # the low 24 bits of the time carry into the high ones, both ways
    low = (GW >> 24 << 24) + (1 << 24) - 10
    c2 = Clock()
    c2.sync(low, 50, 50)
    assert _ms(c2, 70) == low + 20 and _ms(c2, 30) == low - 20


def test_surer_sample_kept_until_it_has_drifted() -> None:
    c = Clock()
    c.sync(GW, 0, 10)  # uncertainty 6 ms
    # 1 s later a sample with a 200 ms round trip, 40 ms off: the first one is kept
    c.sync(GW + 1000 + 40, 905, 1105)
    assert _ms(c, 1005) == GW + 1000
    # a shorter round trip replaces it
    c.sync(GW + 2000 + 3, 2004, 2006)
    assert _ms(c, 2005) == GW + 2003
    # after 100 s of drift allowance (10 ms) a longer one is taken again
    c.sync(GW + 200_000, 201_995, 202_015)
    assert _ms(c, 202_005) == GW + 200_000


def test_stepped_gateway_clock_taken_at_once() -> None:
    c = Clock()
    c.sync(GW, 0, 2)
    c.sync(GW + 60_000 + 100, 99, 301)  # a worse sample, but a minute off: a step
    assert _ms(c, 200) == GW + 60_100


def test_days_without_a_sample_keep_the_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # ticks wrap every 2**30 ms (12 days) and ticks_diff reads 2**29 at most: the clock
    # moves its sync point on as it is read, so 10 days on it still tells the time
    from pubmote_node import clock

    now = [1000]
    monkeypatch.setattr(clock, "ticks_ms", lambda: now[0])
    c = Clock()
    c.sync(GW, 1000, 1000)
    day = 86_400_000
    for d in range(1, 11):
        now[0] = ticks_add(1000, d * day)
        assert _ms(c, now[0]) == GW + d * day, d
        assert _ms(c, ticks_add(now[0], -5000)) == GW + d * day - 5000
