"""The report's latency figures (report.latency_summary: one Spark query for the histogram
and the percentiles) against plain Python over generated latency sets: many decades,
repeats, the bins' edges, zeros, a clock stepped back, NULLs, one value, none."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

import oracle
from pubmote.pipeline.report import BINS_PER_DECADE, LATENCY_DIGITS, PERCENTILES, latency_summary


def _cases() -> list[list[float | None]]:
    rnd = random.Random(33)
    spread = [10 ** rnd.uniform(-3, 5) for _ in range(3000)]  # 1 µs to 100 s
    edges = [10 ** (k / BINS_PER_DECADE) * f for k in range(-20, 80, 7) for f in
             (1 - 1e-9, 1 + 1e-9)] + [1.0, 10.0, 100.0, 1000.0]
    repeats = [round(rnd.gauss(12, 3), 3) for _ in range(2000)]  # the journal's 1 µs steps
    return [spread, edges + spread[:50], repeats,
            [0.0, 0.0, -0.5, -2.25, 3.0, *repeats[:40]],  # a clock stepped back
            [None, 4.5, None, 7.25],
            [42.0], [-1.0, -3.0], [0.0], [None], []]


@pytest.mark.parametrize("values", _cases(), ids=lambda v: "%d values" % len(v))
def test_latency_summary_matches_plain_python(spark: Any, values: list[float | None]) -> None:
    df = spark.createDataFrame([(v,) for v in values], "latency_ms double")
    got = latency_summary(df)
    known = [v for v in values if v is not None]
    assert got.n == len(known)
    hist: dict[float, int] = {}
    for v in known:
        if v > 0:
            b = float(math.floor(math.log10(v) * BINS_PER_DECADE))
            hist[b] = hist.get(b, 0) + 1
    assert got.hist == sorted(hist.items())
    if not known:
        assert got.percentiles == []
        return
    assert len(got.percentiles) == len(PERCENTILES) + 1
    assert got.percentiles[-1] == max(known)  # the maximum, exact
    tol = 10.0 ** -(LATENCY_DIGITS - 1)
    for p, x in zip(PERCENTILES, got.percentiles, strict=False):
        want = oracle.percentile(known, p)
        assert want is not None
        # the group's largest latency: never below the exact one, within the digits kept
        assert want <= x <= want + abs(want) * tol, (p, x, want)


def test_preload_imports_pyplot_on_agg_in_the_background() -> None:
    from pubmote.pipeline.report import preload

    f = preload()
    plt = f.result(timeout=120)
    assert plt.__name__ == "matplotlib.pyplot"
    assert plt.get_backend().lower() == "agg"  # no screen on a gateway
