"""The pipeline's tables recomputed in plain Python from journal records: an oracle
independent of Spark for the batch tests."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from pubmote.pipeline.readings import reading_of

MINUTE_MS = 60_000
EGRESS = ("delivered", "dropped", "nacked")
LATE_MS = 2000


def event_ms(r: dict[str, Any], watermark_ms: float = MINUTE_MS) -> tuple[float, bool]:
    """(the record's event time in ms, whether it came too late): its taken-time (never
    after its arrival), its arrival without one or when it came a watermark late."""
    taken = r.get("t_taken")
    if taken is None:
        return r["t_bridge"], False
    taken = min(taken, r["t_bridge"])
    if r["t_bridge"] - taken >= watermark_ms:
        return r["t_bridge"], True
    return taken, False


def percentile(values: list[float], p: float) -> float | None:
    """The windows table's latency percentile (and percentile_approx's while exact): the
    smallest value with at least p of the values at or below it."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p * len(v)) - 1)]


def windows(recs: list[dict[str, Any]]) -> dict[tuple[int, str, str], dict[str, Any]]:
    acc: dict[tuple[int, str, str], dict[str, Any]] = defaultdict(
        lambda: {"messages": 0, "readings": [], "lat": [], "delivered": 0, "dropped": 0,
                 "lost": 0, "late": 0, "too_late": 0, "times": set()})
    for r in recs:
        if r.get("topic") is None or r["outcome"] not in ("relayed", "fetch_failed", *EGRESS):
            continue
        t, too_late = event_ms(r)
        w = acc[(int(t // MINUTE_MS * MINUTE_MS), r["topic"], r["origin"])]
        w["times"].add("arrival" if too_late or r.get("t_taken") is None else "taken")
        if too_late:
            w["too_late"] += r["outcome"] == "relayed"
            continue
        if r["outcome"] == "relayed":
            w["late"] += r.get("t_taken") is not None and r["t_bridge"] - r["t_taken"] > LATE_MS
            w["messages"] += 1
            x = reading_of(r.get("payload"))
            if x is not None:
                w["readings"].append(x)
        elif r["outcome"] == "delivered":
            w["delivered"] += 1
            w["lat"].append(r["latency_ms"])
        elif r["outcome"] == "fetch_failed":
            w["lost"] += 1
        else:
            w["dropped"] += 1
    out = {}
    for k, w in acc.items():
        xs, egress = w["readings"], w["delivered"] + w["dropped"]
        out[k] = {"messages": w["messages"], "readings": len(xs),
                  "reading_min": min(xs) if xs else None,
                  "reading_max": max(xs) if xs else None,
                  "reading_avg": sum(xs) / len(xs) if xs else None,
                  "latency_p50_ms": percentile(w["lat"], 0.5),
                  "latency_p99_ms": percentile(w["lat"], 0.99),
                  "delivered": w["delivered"], "dropped": w["dropped"], "lost": w["lost"],
                  "drop_rate": w["dropped"] / egress if egress else None,
                  "late": w["late"], "too_late": w["too_late"],
                  "event_time": w["times"].pop() if len(w["times"]) == 1 else "mixed"}
    return out


def health(recs: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, int]]:
    acc: dict[tuple[int, str], dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("published", "delivered_to", "dropped_to", "lost", "ups",
                               "reconnects", "downs"), 0))
    for r in recs:
        o = r["outcome"]
        node = r.get("egress") if o in EGRESS else r.get("origin")
        if node is None:
            continue
        h = acc[(int(r["t_bridge"] // MINUTE_MS * MINUTE_MS), node)]
        key = {"relayed": "published", "delivered": "delivered_to", "dropped": "dropped_to",
               "nacked": "dropped_to", "fetch_failed": "lost", "board_up": "ups",
               "board_down": "downs"}.get(o)
        if key is not None:
            h[key] += 1
        if o == "board_up" and r.get("reconnect"):
            h["reconnects"] += 1
    return dict(acc)


def table_rows(df: Any, keys: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A Spark table as {key: row}, window_start as epoch ms; fails on a duplicate key."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in df.collect():
        d = row.asDict()
        d["window_start"] = int(d["window_start"].timestamp() * 1000)
        k = tuple(d[x] for x in keys)
        assert k not in out, "duplicate row for %r" % (k,)
        out[k] = d
    return out


def assert_same(got: dict[Any, dict[str, Any]], want: dict[Any, dict[str, Any]]) -> None:
    assert set(got) == set(want), (sorted(set(got) ^ set(want))[:5])
    for k, w in want.items():
        g = got[k]
        for col, x in w.items():
            if isinstance(x, float) and g[col] is not None:
                assert math.isclose(g[col], x, rel_tol=1e-9, abs_tol=1e-9), (k, col, g[col], x)
            else:
                assert g[col] == x, (k, col, g[col], x)
