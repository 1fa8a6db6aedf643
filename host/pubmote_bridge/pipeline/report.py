"""`pubmote pipeline --report OUT`: an HTML page (OUT/index.html) with matplotlib PNGs beside
it: message rate per topic over time, the latency distribution, per-node health (drops,
losses, reconnects), readings over time and the last reading of every topic. Everything
is aggregated in Spark first, so the page costs the same for a day of journal as for a
minute; only the aggregates come back to the driver."""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .batch import Log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOP_TOPICS = 8  # lines per plot; the rest are summed as "other topics"
BINS_PER_DECADE = 20


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no screen on a gateway
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    _plt().close(fig)
    return path.name


def _per_topic_series(rows: list[Any], value: str) -> dict[str, list[tuple[Any, float]]]:
    volume: dict[str, int] = {}
    for r in rows:
        volume[r["topic"]] = volume.get(r["topic"], 0) + int(r["messages"])
    top = set(sorted(volume, key=lambda t: -volume[t])[:TOP_TOPICS])
    series: dict[str, dict[Any, float]] = {}
    for r in rows:
        if r[value] is None:
            continue
        key = r["topic"] if r["topic"] in top else "other topics"
        s = series.setdefault(key, {})
        s[r["window_start"]] = s.get(r["window_start"], 0.0) + float(r[value])
    return {k: sorted(v.items()) for k, v in series.items()}


def _rate_plot(rows: list[Any], out: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    for topic, pts in _per_topic_series(rows, "rate").items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=topic)
    ax.set_ylabel("messages / s")
    ax.set_title("Message rate per topic")
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    return _save(fig, out / "rate.png")


def _reading_plot(rows: list[Any], out: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4))
    for topic, pts in _per_topic_series(rows, "reading_avg").items():
        if topic != "other topics":
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=topic)
    ax.set_ylabel("average reading per window")
    ax.set_title("Readings over time")
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    return _save(fig, out / "readings.png")


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
    return _save(fig, out / "latency.png")


def _health_plot(health: list[Any], out: Path) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.35 * len(health) + 1)))
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
    return _save(fig, out / "health.png")


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


def write_report(spark: SparkSession, j: DataFrame, tables: str | Path, out: str | Path, *,
                 journal: str | Path, window: str, log: Log = print) -> Path:
    """Write OUT/index.html and its PNGs from the batch tables in `tables` and `j`, the
    journal's usable rows as the batch run prepared them (`journal` names it on the page)."""
    from pyspark.sql import functions as F

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    windows = spark.read.parquet(str(Path(tables) / "windows"))
    health = spark.read.parquet(str(Path(tables) / "health"))
    seconds = F.col("window_end").cast("long") - F.col("window_start").cast("long")
    wrows = (windows.withColumn("rate", F.col("messages") / seconds)
             .select("window_start", "topic", "messages", "rate", "reading_avg")
             .orderBy("window_start").collect())
    hrows = (health.groupBy("node")
             .agg(*[F.sum(c).alias(c) for c in ("published", "delivered_to", "dropped_to",
                                                 "lost", "ups", "reconnects", "downs")])
             .orderBy("node").collect())
    lat = F.col("latency_ms")
    hist = (j.where((F.col("outcome") == "delivered") & (lat > 0))
            .groupBy(F.floor(F.log10(lat) * BINS_PER_DECADE).alias("b")).count()
            .orderBy("b").collect())
    pct = (j.where(F.col("outcome") == "delivered")
           .agg(F.percentile_approx(lat, [0.5, 0.9, 0.99, 1.0]).alias("p"),
                F.count(lat).alias("n")).first())
    last = (j.where(F.col("reading").isNotNull())
            .groupBy("topic", "origin")
            .agg(F.max_by("reading", "t_bridge").alias("reading"),
                 F.max("t_bridge").alias("t"), F.count("reading").alias("n"))
            .orderBy("topic").collect())
    log("report: %d windows, %d nodes, %d topics with readings" % (len(wrows), len(hrows),
                                                                   len(last)))
    figs = []
    if wrows:
        figs.append(("Message rate per topic", _rate_plot(wrows, out)))
        if any(r["reading_avg"] is not None for r in wrows):
            figs.append(("Readings over time", _reading_plot(wrows, out)))
    if hist:
        figs.append(("Latency distribution",
                     _latency_plot([(float(r["b"]), int(r["count"])) for r in hist], out)))
    if hrows:
        figs.append(("Per-node health", _health_plot(hrows, out)))
    p = pct["p"] if pct is not None and pct["p"] else None
    summary: list[list[Any]] = [["messages", sum(int(r["messages"]) for r in wrows)],
               ["topics", len({r["topic"] for r in wrows})],
               ["deliveries", int(pct["n"]) if pct is not None else 0],
               ["latency p50 / p90 / p99 / max (ms)",
                " / ".join(_fmt(x) for x in p) if p else "-"],
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
             "<p>Generated %s UTC. Windows of %s.</p>" % (
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
