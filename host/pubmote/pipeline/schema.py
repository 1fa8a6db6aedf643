"""The journal's record schema, given to Spark explicitly (no inference: a stream needs
it, and a schema guessed from one file would change with the files).

Records (one JSON line each; see host/pubmote/core/journal.py and core/hub_base.py):
  outcome   relayed (one per message, with `payload` hex) | delivered | dropped |
            nacked (one per message and egress, with `egress` and `latency_ms`) |
            fetch_failed (a board announced a message the bridge could not fetch) |
            board_up (`reconnect` true when not the first) | board_down
  t_bridge  ms since the epoch when the bridge received the message (the event time; all
            records of one message share it) or when the board event happened
  t_board   the board's signature time (ms), when it signs
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT = "_corrupt_record"

JOURNAL_SCHEMA = StructType([
    StructField("t_board", LongType()),
    StructField("t_bridge", DoubleType()),
    StructField("topic", StringType()),
    StructField("origin", StringType()),
    StructField("ingress", StringType()),
    StructField("egress", StringType()),
    StructField("size", LongType()),
    StructField("outcome", StringType()),
    StructField("latency_ms", DoubleType()),
    StructField("payload", StringType()),
    StructField("reconnect", BooleanType()),
])

# Only the finished files: the in-progress ones are hidden (.journal-*.part), which
# Spark's file index skips anyway; other files a user drops in the folder are not ours.
JOURNAL_GLOB = "journal-*.jsonl"
