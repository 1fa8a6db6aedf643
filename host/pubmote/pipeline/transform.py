"""The pipeline's one transformation, shared by batch and streaming: journal rows into
per-topic and per-node windows. With a watermark it is a valid streaming aggregation
(append mode); in batch the watermark does nothing, so both compute the same rows.

The windows table is keyed by event time: when a board took the reading (`t_taken`), or
its arrival at the bridge (`t_bridge`) when the board had no synced clock. How late a
message came (its age: t_bridge - t_taken) decides the rest, from the record alone, so a
batch run and a stream agree whatever order the files come in:
  age <= late_ms               on time, in its taken-time window;
  late_ms < age < watermark    late: in its taken-time window, counted in `late` too;
  age >= watermark             too late: a stream may have written that window already, so
                               it is counted in `too_late` of the window it arrived in,
                               and in none of that window's other columns.
A taken-time after the arrival (a board's clock ahead of the bridge's) is taken as the
arrival: the windows' event times never pass the journal's, which keeps a stream's
watermark behind every message the journal still holds (docs/pipeline.md).
The health table (what happened at the bridge: deliveries, registrations) stays on
arrival time."""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

EGRESS_OUTCOMES = ("delivered", "dropped", "nacked")
MESSAGE_OUTCOMES = ("relayed", "fetch_failed", *EGRESS_OUTCOMES)

WINDOW_COLUMNS = ("window_start", "window_end", "topic", "origin", "messages", "readings",
                  "reading_min", "reading_avg", "reading_max", "latency_p50_ms",
                  "latency_p99_ms", "delivered", "dropped", "lost", "drop_rate", "late",
                  "too_late", "event_time")
HEALTH_COLUMNS = ("window_start", "window_end", "node", "published", "delivered_to",
                  "dropped_to", "lost", "ups", "reconnects", "downs")
LATE_MS = 2000  # as `pubmote sub --late-ms`: older than this on arrival is late
PERCENTILE_ACCURACY = 10_000  # a stream's latency digest (percentile_approx's default)

_UNIT_MS = {"microsecond": 0.001, "millisecond": 1, "second": 1000, "minute": 60_000,
            "hour": 3_600_000, "day": 86_400_000, "week": 604_800_000}
_TERM = re.compile(r"(\d+(?:\.\d+)?)\s*(%s)s?" % "|".join(_UNIT_MS), re.IGNORECASE)


def interval_ms(text: str) -> float:
    """A Spark interval as the CLI takes it ('1 minute', '1 minute 30 seconds') in ms."""
    terms = _TERM.findall(text)
    if not terms or _TERM.sub("", text).strip():
        raise ValueError("not an interval: %r" % text)
    return sum(float(n) * _UNIT_MS[u.lower()] for n, u in terms)


def usable() -> Column:
    """Rows the tables can use: a time and an outcome (not malformed lines, not strays)."""
    return F.col("t_bridge").isNotNull() & F.col("outcome").isNotNull()


def prepare(df: DataFrame) -> DataFrame:
    """The usable rows of the journal's columns with their arrival time `ts` (from
    t_bridge): what every table aggregates (the windows table by event time instead).
    The reading was decoded when the columns were written."""
    return df.where(usable()).withColumn(
        "ts", F.timestamp_micros((F.col("t_bridge") * 1000).cast("long")))


def _count(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0)).cast("long")


def _percentiles(values: Column, ps: tuple[float, ...]) -> Column:
    """The p-th values of a sorted array (NULL when it is empty), as an array."""
    n = F.size(values)
    return F.array(*[F.try_element_at(values, F.greatest(F.lit(1), F.ceil(n * p)).cast("int"))
                     for p in ps])


def _flatten(df: DataFrame, columns: tuple[str, ...], *, by_event_time: bool = False
             ) -> DataFrame:
    # (told, not looked up in df.columns: on Spark Connect each look is a round trip to the
    # server's analyser, some 0.1-0.3 s)
    df = df.withColumn("window_start", F.col("window.start")).withColumn(
        "window_end", F.col("window.end"))
    if by_event_time:  # which time the window's records were placed by, and latencies
        df = (df.withColumn("event_time", F.when(F.col("by_arrival") == 0, "taken")
                            .when(F.col("by_taken") == 0, "arrival").otherwise("mixed"))
              .withColumn("latency_p50_ms", F.col("latency")[0])
              .withColumn("latency_p99_ms", F.col("latency")[1]))
    return df.select(*columns)


def by_event_time(df: DataFrame, watermark: str, late_ms: float = LATE_MS) -> DataFrame:
    """The rows with `ts` their event time (the module's header says which), `age` how
    late they came (NULL without a taken-time), and `too_late`."""
    arrival = F.col("t_bridge")
    taken = F.when(F.col("t_taken").isNotNull(), F.least(F.col("t_taken"), arrival))
    age = arrival - taken
    too_late = F.coalesce(age >= F.lit(interval_ms(watermark)), F.lit(False))
    t = F.when(too_late, arrival).otherwise(F.coalesce(taken, arrival))
    return (df.withColumn("age", age).withColumn("too_late", too_late)
            .withColumn("late", ~too_late & (age > F.lit(float(late_ms))))
            .withColumn("by_arrival", too_late | taken.isNull())
            .withColumn("ts", F.timestamp_micros((t * 1000).cast("long"))))


def topic_windows(df: DataFrame, window: str, watermark: str,
                  late_ms: float = LATE_MS, *, exact: bool = True) -> DataFrame:
    """Per topic and origin board, per event-time window: messages, min/avg/max reading,
    p50/p99 latency to subscribers, deliveries, drops (dropped or nacked at an egress),
    messages lost before the bridge had them (fetch_failed), the drop rate over egresses,
    messages that came late (`late`, within the watermark) and too late (`too_late`,
    counted where they arrived), and the time the window's records were placed by
    (`event_time`: taken, arrival or mixed). exact=False: the latency percentiles from a
    bounded digest (a stream's)."""
    df = by_event_time(df, watermark, late_ms)
    on_time = ~F.col("too_late")
    out = F.when(on_time, F.col("outcome"))
    # What each row counts in, as 0/1 columns computed before the group-by: in the scan's
    # generated code, once per row. In the aggregate they cost more: the latency list makes
    # it an object aggregate, which Spark runs without whole-stage code generation, and
    # each count there compared the outcome's string again (on a warm server, 11-13 % less
    # CPU at 10M rows this way; bench/pipeline/PROFILE.md).
    flags = {"messages": out == "relayed",
             "delivered": out == "delivered",
             "dropped": out.isin("dropped", "nacked"),
             "lost": out == "fetch_failed",
             "egresses": out.isin(*EGRESS_OUTCOMES),
             "late": (out == "relayed") & F.col("late"),
             "too_late": (F.col("outcome") == "relayed") & F.col("too_late"),
             "by_arrival": F.col("by_arrival"),
             "by_taken": ~F.col("by_arrival")}
    rows = (df.withWatermark("ts", watermark)
              .where(F.col("outcome").isin(*MESSAGE_OUTCOMES) & F.col("topic").isNotNull())
              .select("ts", "topic", "origin",
                      F.when(on_time, F.col("reading")).alias("reading"),
                      F.when(out == "delivered", F.col("latency_ms")).alias("latency_ms"),
                      *[F.when(c, 1).otherwise(0).alias(k) for k, c in flags.items()]))

    def count(flag: str) -> Column:
        return F.sum(flag).cast("long")

    # The window's latencies, sorted, and both percentiles picked from them: exact (the
    # smallest latency with at least p of them at or below it), and 15-20% less CPU at
    # 10M rows than percentile_approx's digests, whose results it equals while those are
    # exact (bench/pipeline/PROFILE.md). The list is one window's deliveries.
    latency = _percentiles(F.sort_array(F.collect_list("latency_ms")), (0.5, 0.99))
    if not exact:
        # A stream keeps each open window's aggregate in its state store and writes the
        # changed ones again every batch: a list of every latency grows with the window
        # (1.2M a minute at full relay rate) and costs a rewrite per batch. A digest stays
        # bounded; its rank error is at most 1/PERCENTILE_ACCURACY of the window's
        # deliveries, and it is exact for a window of fewer (docs/pipeline.md).
        latency = F.percentile_approx("latency_ms", [0.5, 0.99], PERCENTILE_ACCURACY)
    agg = (rows.groupBy(F.window("ts", window), "topic", "origin")
               .agg(count("messages").alias("messages"),
                    F.count("reading").alias("readings"),
                    F.min("reading").alias("reading_min"),
                    F.avg("reading").alias("reading_avg"),
                    F.max("reading").alias("reading_max"),
                    latency.alias("latency"),
                    count("delivered").alias("delivered"),
                    count("dropped").alias("dropped"),
                    count("lost").alias("lost"),
                    # no subscriber, no egress: the rate is NULL, not an error
                    F.try_divide(count("dropped"), count("egresses")).alias("drop_rate"),
                    count("late").alias("late"),
                    count("too_late").alias("too_late"),
                    count("by_arrival").alias("by_arrival"),
                    count("by_taken").alias("by_taken")))
    return _flatten(agg, WINDOW_COLUMNS, by_event_time=True)


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


TABLE_NAMES = ("windows", "health")


def tables(df: DataFrame, window: str, watermark: str,
           late_ms: float = LATE_MS, *, exact: bool = True) -> dict[str, DataFrame]:
    """Both tables of prepared rows, by name (TABLE_NAMES); exact: as topic_windows."""
    return {"windows": topic_windows(df, window, watermark, late_ms, exact=exact),
            "health": node_health(df, window, watermark)}
