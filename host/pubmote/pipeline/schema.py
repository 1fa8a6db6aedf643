"""The schema of the journal's columns (pipeline/columns.py), given to Spark explicitly (no
inference: a stream needs it, and a schema guessed from one file would change with the
files). The fields are the journal records' own, `payload` decoded into `reading`.

Records (one JSON line each; see host/pubmote/core/journal.py and core/records.py):
  outcome   relayed (one per message, with `payload` hex) | delivered | dropped |
            nacked (one per message and egress, with `egress` and `latency_ms`) |
            fetch_failed (a board announced a message the bridge could not fetch) |
            board_up (`reconnect` true when not the first) | board_down |
            board_asleep | board_awake | session_expired (docs/protocols/sleep.md) |
            board_evicted
  t_bridge  ms since the epoch when the bridge received the message (the event time; all
            records of one message share it) or when the board event happened
  t_board   the board's signature time (ms), when it signs
  t_taken   ms since the epoch when the board took the message, by its clock (null when it
            has none): t_bridge - t_taken is how late it arrived (docs/protocols/event-time.md)
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    StringType,
    StructField,
    StructType,
)

COLUMNS_SCHEMA = StructType([
    StructField("t_bridge", DoubleType()),
    StructField("topic", StringType()),
    StructField("origin", StringType()),
    StructField("egress", StringType()),
    StructField("outcome", StringType()),
    StructField("latency_ms", DoubleType()),
    StructField("reconnect", BooleanType()),
    StructField("t_taken", DoubleType()),
    StructField("reading", DoubleType()),
])
