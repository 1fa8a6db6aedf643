"""The pipeline's one transformation, shared by batch and streaming: journal rows into
per-topic and per-node windows. With a watermark it is a valid streaming aggregation
(append mode); in batch the watermark does nothing, so both compute the same rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

EGRESS_OUTCOMES = ("delivered", "dropped", "nacked")
MESSAGE_OUTCOMES = ("relayed", "fetch_failed", *EGRESS_OUTCOMES)

WINDOW_COLUMNS = ("window_start", "window_end", "topic", "origin", "messages", "readings",
                  "reading_min", "reading_avg", "reading_max", "latency_p50_ms",
                  "latency_p99_ms", "delivered", "dropped", "lost", "drop_rate")
HEALTH_COLUMNS = ("window_start", "window_end", "node", "published", "delivered_to",
                  "dropped_to", "lost", "ups", "reconnects", "downs")


def usable() -> Column:
    """Rows the tables can use: a time and an outcome (not malformed lines, not strays)."""
    return F.col("t_bridge").isNotNull() & F.col("outcome").isNotNull()


def prepare(df: DataFrame) -> DataFrame:
    """The usable rows of the journal's columns with their event time `ts` (from t_bridge):
    what every table aggregates. The reading was decoded when the columns were written."""
    return df.where(usable()).withColumn(
        "ts", F.timestamp_micros((F.col("t_bridge") * 1000).cast("long")))


def _count(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0)).cast("long")


def _percentiles(values: Column, ps: tuple[float, ...]) -> Column:
    """The p-th values of a sorted array (NULL when it is empty), as an array."""
    n = F.size(values)
    return F.array(*[F.try_element_at(values, F.greatest(F.lit(1), F.ceil(n * p)).cast("int"))
                     for p in ps])


def _flatten(df: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    df = df.withColumn("window_start", F.col("window.start")).withColumn(
        "window_end", F.col("window.end"))
    if "latency" in df.columns:
        df = df.withColumn("latency_p50_ms", F.col("latency")[0]).withColumn(
            "latency_p99_ms", F.col("latency")[1])
    return df.select(*columns)


def topic_windows(df: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per topic and origin board, per window: messages, min/avg/max reading, p50/p99
    latency to subscribers, deliveries, drops (dropped or nacked at an egress), messages
    lost before the bridge had them (fetch_failed), and the drop rate over egresses."""
    out = F.col("outcome")
    delivered = F.when(out == "delivered", F.col("latency_ms"))
    # The window's latencies, sorted, and both percentiles picked from them: exact (the
    # smallest latency with at least p of them at or below it), and 15-20% less CPU at
    # 10M rows than percentile_approx's digests, whose results it equals while those are
    # exact (bench/pipeline/PROFILE.md). The list is one window's deliveries.
    latency = _percentiles(F.sort_array(F.collect_list(delivered)), (0.5, 0.99))
    dropped = _count(out.isin("dropped", "nacked"))
    agg = (df.withWatermark("ts", watermark)
             .where(out.isin(*MESSAGE_OUTCOMES) & F.col("topic").isNotNull())
             .groupBy(F.window("ts", window), "topic", "origin")
             .agg(_count(out == "relayed").alias("messages"),
                  F.count("reading").alias("readings"),
                  F.min("reading").alias("reading_min"),
                  F.avg("reading").alias("reading_avg"),
                  F.max("reading").alias("reading_max"),
                  latency.alias("latency"),
                  _count(out == "delivered").alias("delivered"),
                  dropped.alias("dropped"),
                  _count(out == "fetch_failed").alias("lost"),
                  # no subscriber, no egress: the rate is NULL, not an error
                  F.try_divide(dropped, _count(out.isin(*EGRESS_OUTCOMES)))
                  .alias("drop_rate")))
    return _flatten(agg, WINDOW_COLUMNS)


def node_health(df: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per node (a board, an SP client `sp:...`, an NDN app) per window: what it published,
    what was delivered to it and dropped on the way to it, what it lost, and its
    registrations, reconnects and disconnects."""
    out = F.col("outcome")
    node = F.when(out.isin(*EGRESS_OUTCOMES), F.col("egress")).otherwise(F.col("origin"))
    agg = (df.withWatermark("ts", watermark)
             .withColumn("node", node)
             .where(F.col("node").isNotNull())
             .groupBy(F.window("ts", window), "node")
             .agg(_count(out == "relayed").alias("published"),
                  _count(out == "delivered").alias("delivered_to"),
                  _count(out.isin("dropped", "nacked")).alias("dropped_to"),
                  _count(out == "fetch_failed").alias("lost"),
                  _count(out == "board_up").alias("ups"),
                  _count((out == "board_up") & F.coalesce(F.col("reconnect"), F.lit(False)))
                  .alias("reconnects"),
                  _count(out == "board_down").alias("downs")))
    return _flatten(agg, HEALTH_COLUMNS)


TABLES = {"windows": topic_windows, "health": node_health}
