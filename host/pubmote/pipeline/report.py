"""`pubmote pipeline --report OUT`: an HTML page (OUT/index.html) with matplotlib PNGs beside
it: message rate per topic over time, the latency distribution, per-node health (drops,
losses, reconnects), readings over time per topic and per board, and the last reading of
every topic. Everything
is aggregated in Spark first, so the page costs the same for a day of journal as for a
minute; only the aggregates come back to the driver."""

from __future__ import annotations

import datetime as dt
import html
import math
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import Log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOP_TOPICS = 8  # lines per plot; the rest are summed as "other topics"
MAX_POINTS = 240  # time buckets per line (windows are merged beyond that)
BINS_PER_DECADE = 20
LATENCY_DIGITS = 4  # significant digits of the page's latency percentiles
PERCENTILES = (0.5, 0.9, 0.99)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no screen on a gateway
    import matplotlib.pyplot as plt

    return plt


def preload() -> Future[Any]:
    """Import matplotlib in a background thread (the first call of _plt), to be called as a
    run with a report starts: its import (1.1 s, font cache included) then overlaps the
    tables' job, which keeps this process waiting on Spark, instead of holding the GIL
    while the report's queries answer."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pubmote-matplotlib")
    try:
        return pool.submit(_plt)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


def _save(fig: Any, path: Path, left: float = 0.07, bottom: float = 0.2, top: float = 0.9
          ) -> str:
    # fixed margins: tight_layout() measured every label by drawing the figure once more
    # (0.15 s a plot, 40 % of the page's plotting)
    fig.subplots_adjust(left=left, right=0.98, top=top, bottom=bottom)
    fig.savefig(path, dpi=90)
    _plt().close(fig)
    return path.name


def _series(rows: list[Any]) -> dict[str, list[tuple[Any, float]]]:
    """(t, key, value) rows as one sorted point list per key."""
    series: dict[str, list[tuple[Any, float]]] = {}
    for r in rows:
        if r["value"] is not None:
            series.setdefault(r["key"], []).append((r["t"], float(r["value"])))
    return {k: sorted(v) for k, v in sorted(series.items())}


def _line_plot(series: dict[str, list[tuple[Any, float]]], out: Path, name: str, *,
               title: str, ylabel: str) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    for key, pts in series.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=key)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    return _save(fig, out / name)


def _latency_plot(hist: list[tuple[float, int]], out: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.5))
    lo = [10 ** (b / BINS_PER_DECADE) for b, _ in hist]
    widths = [x * (10 ** (1 / BINS_PER_DECADE) - 1) for x in lo]
    ax.bar(lo, [c for _, c in hist], width=widths, align="edge")
    ax.set_xscale("log")
    ax.set_xlabel("bridge receipt to delivery (ms)")
    ax.set_ylabel("deliveries")
    ax.set_title("Latency distribution")
    return _save(fig, out / "latency.png", bottom=0.15)


def _health_plot(health: list[Any], out: Path) -> str:
    plt = _plt()
    height = max(2.5, 0.35 * len(health) + 1)  # inches
    fig, ax = plt.subplots(figsize=(9, height))
    names = [r["node"] for r in health]
    y = range(len(names))
    ax.barh([i - 0.27 for i in y], [r["dropped_to"] for r in health], height=0.27,
            label="dropped/nacked to it")
    ax.barh(list(y), [r["lost"] for r in health], height=0.27, label="lost (fetch failed)")
    ax.barh([i + 0.27 for i in y], [r["reconnects"] for r in health], height=0.27,
            label="reconnects")
    ax.set_yticks(list(y), names, fontsize=7)
    ax.set_title("Per-node health")
    ax.legend(fontsize=7)
    # room for the longest node name (7-point labels: some 0.55 % of the width a letter)
    left = min(0.45, 0.03 + 0.0055 * max((len(n) for n in names), default=0))
    return _save(fig, out / "health.png", left=left, bottom=0.4 / height, top=1 - 0.35 / height)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join("<th>%s</th>" % html.escape(h) for h in head)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(c)) for c in r)
                   for r in rows)
    return "<table><tr>%s</tr>%s</table>" % (th, body)


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return ("%." + str(nd) + "f") % x
    return str(x)


def _time_series(windows: DataFrame) -> tuple[dict[str, list[tuple[Any, float]]], ...]:
    """The plots' lines from the windows table, aggregated in Spark to at most MAX_POINTS
    time buckets (whole windows each) and TOP_TOPICS lines: message rate per topic (the
    rest summed as "other topics"), average reading per topic and per board. What comes
    back to the driver is plot-sized whatever the journal's length."""
    from pyspark.sql import functions as F

    start, end = F.col("window_start").cast("long"), F.col("window_end").cast("long")

    def top(key: str) -> list[str]:
        return [r[key] for r in windows.groupBy(key).agg(F.sum("messages").alias("n"))
                .orderBy(F.desc("n"), key).limit(TOP_TOPICS).collect()]

    weighted = (F.sum(F.col("reading_avg") * F.col("readings")) / F.sum("readings"))

    def readings(key: str, keep: list[str]) -> list[Any]:
        return (windows.where(F.col(key).isin(keep) & (F.col("readings") > 0))
                .groupBy(t, F.col(key).alias("key")).agg(weighted.alias("value")).collect())

    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="pubmote-series") as pool:
        # the span and the top lines at once: each is a round trip to Spark
        topics_f, boards_f = pool.submit(top, "topic"), pool.submit(top, "origin")
        span = windows.agg(F.min(start).alias("lo"), F.max(end).alias("hi"),
                           F.min(end - start).alias("w")).first()
        topics, boards = topics_f.result(), boards_f.result()
        if span is None or span["lo"] is None:
            return {}, {}, {}
        lo, w = int(span["lo"]), max(1, int(span["w"]))
        bucket_s = w * max(1, -(-(int(span["hi"]) - lo) // (w * MAX_POINTS)))
        t = F.timestamp_seconds(F.floor((start - lo) / bucket_s) * bucket_s + lo).alias("t")
        rate_key = F.when(F.col("topic").isin(topics), F.col("topic")).otherwise("other topics")
        rates = pool.submit(lambda: windows.groupBy(t, rate_key.alias("key"))
                            .agg((F.sum("messages") / bucket_s).alias("value")).collect())
        by_topic = pool.submit(readings, "topic", topics)
        by_board = pool.submit(readings, "origin", boards)
        return (_series(rates.result()), _series(by_topic.result()),
                _series(by_board.result()))


class Latencies(NamedTuple):
    """The deliveries' latencies on the page: how many, their histogram ((bin, count),
    BINS_PER_DECADE bins a decade, positive latencies only), and PERCENTILES then the
    maximum (ms)."""

    n: int
    hist: list[tuple[float, int]]
    percentiles: list[float]


def latency_summary(delivered: DataFrame) -> Latencies:
    """The page's latency figures from one query over the deliveries (instead of one for
    the histogram and one for the percentiles: each read every journal row again). Spark
    counts the latencies per histogram bin and value to LATENCY_DIGITS significant digits,
    some 9,000 groups a decade at most whatever the journal's length; the percentiles are
    picked here, as the windows table picks them (the smallest latency with at least p of
    them at or below it), each within 10^-(LATENCY_DIGITS-1) of its value, and the
    maximum exact. Latencies of 0 or less (a clock stepped back) count in the percentiles,
    not in the log-scale histogram."""
    from pyspark.sql import functions as F

    lat = F.col("latency_ms")
    size = F.abs(lat)
    exp = F.floor(F.log10(size))  # NULL for 0
    groups = (delivered.where(lat.isNotNull())
              .groupBy(F.signum(lat).alias("sign"), exp.alias("e"),
                       F.round(size / F.pow(F.lit(10.0), exp), LATENCY_DIGITS - 1).alias("m"),
                       F.floor(F.log10(lat) * BINS_PER_DECADE).alias("bin"))  # NULL: <= 0
              .agg(F.count(F.lit(1)).alias("n"), F.max(lat).alias("hi"))
              .collect())
    hist: dict[float, int] = {}
    for g in groups:
        if g["bin"] is not None:
            hist[float(g["bin"])] = hist.get(float(g["bin"]), 0) + int(g["n"])

    def by_value(g: Any) -> tuple[float, ...]:
        # rounding keeps the order: a group's latencies are all below the next one's
        sign = g["sign"]
        return (sign, sign * (g["e"] or 0), sign * (g["m"] or 0), g["bin"] or 0, g["hi"])

    ranked = sorted(groups, key=by_value)
    n = sum(int(g["n"]) for g in ranked)
    picks: list[float] = []
    seen, i = 0, 0
    for p in PERCENTILES:
        rank = max(1, math.ceil(n * p))
        while i < len(ranked) and seen + int(ranked[i]["n"]) < rank:
            seen += int(ranked[i]["n"])
            i += 1
        if i < len(ranked):
            picks.append(float(ranked[i]["hi"]))
    if ranked:
        picks.append(max(float(g["hi"]) for g in ranked))
    return Latencies(n, sorted(hist.items()), picks)


def write_report(spark: SparkSession, j: DataFrame, tables: str | Path, out: str | Path, *,
                 journal: str | Path, window: str, log: Log = print) -> Path:
    """Write OUT/index.html and its PNGs from the batch tables in `tables` and `j`, the
    journal's usable rows as the batch run prepared them (`journal` names it on the page).
    Run after the tables are written: its queries beside the tables' (tried) left the
    server's heap short and took longer than one after the other."""
    from pyspark.sql import functions as F

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    windows = spark.read.parquet(str(Path(tables) / "windows"))
    health = spark.read.parquet(str(Path(tables) / "health"))
    # The page's queries are small and independent: at once, they share Spark's cores
    # and each one's planning and scheduling (most of a small query's time, and of a
    # Spark Connect round trip) overlaps the others'.
    with ThreadPoolExecutor(max_workers=6, thread_name_prefix="pubmote-report") as pool:
        submit = pool.submit
        series_f = submit(_time_series, windows)
        hrows_f = submit(lambda: health.groupBy("node").agg(
            *[F.sum(c).alias(c) for c in ("published", "delivered_to", "dropped_to", "lost",
                                          "ups", "reconnects", "downs")])
            .orderBy("node").collect())
        hist_f = submit(lambda: latency_summary(j.where(F.col("outcome") == "delivered")))
        last_f = submit(lambda: j.where(F.col("reading").isNotNull())
                        .groupBy("topic", "origin")
                        .agg(F.max_by("reading", "t_bridge").alias("reading"),
                             F.max("t_bridge").alias("t"), F.count("reading").alias("n"))
                        .orderBy("topic").collect())
        totals_f = submit(lambda: windows.agg(F.sum("messages").alias("messages"),
                                              F.countDistinct("topic").alias("topics"),
                                              F.sum("late").alias("late"),
                                              F.sum("too_late").alias("too_late")).first())
        # each plot drawn (in this thread: pyplot's state is not for threads) as soon as
        # its data is in, while Spark still answers the others
        _plt()
        pngs: dict[str, str] = {}
        hrows: list[Any] = []
        rates: dict[str, list[tuple[Any, float]]] = {}
        plots: list[Future[Any]] = [series_f, hrows_f, hist_f]
        for f in as_completed(plots):
            if f is series_f:
                rates, topic_readings, board_readings = series_f.result()
                for title, png, points, heading, ylabel in (
                        ("Message rate per topic", "rate.png", rates,
                         "Message rate per topic", "messages / s"),
                        ("Readings over time", "readings.png", topic_readings,
                         "Readings over time (per topic)", "average reading"),
                        ("Readings per board", "board_readings.png", board_readings,
                         "Readings per board over time", "average reading")):
                    if points:
                        pngs[title] = _line_plot(points, out, png, title=heading,
                                                 ylabel=ylabel)
            elif f is hrows_f:
                hrows = hrows_f.result()
                if hrows:
                    pngs["Per-node health"] = _health_plot(hrows, out)
            else:
                hist = hist_f.result().hist
                if hist:
                    pngs["Latency distribution"] = _latency_plot(hist, out)
    lats, last, totals = hist_f.result(), last_f.result(), totals_f.result()
    assert totals is not None
    log("report: %d points of rate, %d nodes, %d topics with readings"
        % (sum(len(v) for v in rates.values()), len(hrows), len(last)))
    figs = [(title, pngs[title]) for title in (
        "Message rate per topic", "Readings over time", "Readings per board",
        "Latency distribution", "Per-node health") if title in pngs]
    summary: list[list[Any]] = [["messages", int(totals["messages"] or 0)],
               ["topics", int(totals["topics"] or 0)],
               ["late (counted in their windows) / too late (counted where they arrived)",
                "%d / %d" % (int(totals["late"] or 0), int(totals["too_late"] or 0))],
               ["deliveries", lats.n],
               ["latency p50 / p90 / p99 / max (ms)",
                " / ".join(_fmt(x) for x in lats.percentiles) if lats.n else "-"],
               ["journal", str(journal)], ["tables", str(tables)]]
    health_rows = [[r["node"], r["published"], r["delivered_to"], r["dropped_to"], r["lost"],
                    r["ups"], r["reconnects"], r["downs"]] for r in hrows]
    last_rows = [[r["topic"], r["origin"], _fmt(r["reading"], 3),
                  dt.datetime.fromtimestamp(r["t"] / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
                  r["n"]] for r in last]
    parts = ["<!doctype html><meta charset=utf-8><title>pubmote pipeline report</title>",
             "<style>body{font-family:sans-serif;max-width:960px;margin:auto}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:2px 6px;text-align:left}img{max-width:100%}</style>",
             "<h1>pubmote pipeline report</h1>",
             "<p>Generated %s UTC. Windows of %s by event time: when the board took a "
             "reading, or its arrival at the bridge without a taken-time.</p>" % (
                 dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"), html.escape(window)),
             _table(["", ""], summary)]
    for title, png in figs:
        parts.append("<h2>%s</h2><img src=\"%s\" alt=\"%s\">" % (title, png, title))
    parts.append("<h2>Per-node health (whole journal)</h2>")
    parts.append(_table(["node", "published", "delivered to", "dropped to", "lost", "ups",
                         "reconnects", "downs"], health_rows))
    parts.append("<h2>Last readings</h2>")
    parts.append(_table(["topic", "origin", "reading", "at (UTC)", "readings"], last_rows))
    page = out / "index.html"
    page.write_text("\n".join(parts) + "\n")
    return page
