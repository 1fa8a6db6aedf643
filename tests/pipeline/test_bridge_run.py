"""A short real bridge run with simulated boards, journaled: the Spark tables count exactly
the messages an SP subscriber saw, per topic, and hold the readings it decoded."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from e2e import Collector, free_port, sp_connected, wait_until
from pubmote.boards.fleet import SimFleet
from pubmote.core.addresses import DEFAULT_BAUD
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config
from pubmote.pipeline.batch import run_batch
from pubmote.pipeline.readings import reading_of

TOPICS = [b"/pubmote/demo/sim1/temperature", b"/pubmote/demo/sim2/temperature"]


def test_spark_counts_equal_what_the_sp_subscriber_saw(spark: Any, tmp_path: Path) -> None:
    jdir = tmp_path / "journal"

    async def run() -> list[bytes]:
        url = "tcp://127.0.0.1:%d" % free_port()
        fleet = SimFleet(2, tmp_path / "sim", period_ms=100)
        cfg = load_config(None, {"sp_pub": [url], "journal": str(jdir),
                                 "journal_max_age_s": 0.5, "timeout_ms": 1000,
                                 "allow_anonymous_boards": True})  # keyless boards
        col = Collector(url, b"/pubmote/")
        fleet.start()
        try:
            async with Bridge(cfg) as bridge:
                # the subscriber first, then the boards: it sees every message relayed
                # (on a loaded machine the boards beat a subscriber dialled beside them)
                await sp_connected(bridge, 30)
                for b in fleet.boards:
                    bridge.add_serial(b.port, DEFAULT_BAUD)
                for t in TOPICS:
                    await col.wait_for(t + b"|", 15, 30)
                fleet.stop()  # no new messages; what is in flight reaches the client
                sent = bridge.hub.counters["messages"]
                await wait_until(lambda: len(col.lines) >= sent, 10, "the last messages")
                await asyncio.sleep(0.3)
            return list(col.lines)
        finally:
            col.close()
            fleet.stop()

    lines = asyncio.run(run())
    seen = Counter(line.split(b"|", 1)[0].decode() for line in lines)
    assert set(seen) == {t.decode() for t in TOPICS} and min(seen.values()) >= 15
    stats = run_batch(spark, jdir, tmp_path / "out", window="1 minute", watermark="1 minute",
                      log=lambda _: None)
    assert stats["unusable"] == 0
    from pyspark.sql import functions as F

    windows = spark.read.parquet(str(tmp_path / "out" / "windows"))
    rows = windows.groupBy("topic").agg(F.sum("messages").alias("n"),
                                        F.sum("readings").alias("readings"),
                                        F.min("reading_min").alias("lo"),
                                        F.max("reading_max").alias("hi")).collect()
    assert {r["topic"]: r["n"] for r in rows} == dict(seen)
    for r in rows:  # the readings Spark decoded are the ones the subscriber got
        got = [reading_of(line.split(b"|", 1)[1].hex()) for line in lines
               if line.startswith(r["topic"].encode() + b"|")]
        assert r["readings"] == len(got) and (r["lo"], r["hi"]) == (min(got), max(got))
    health = spark.read.parquet(str(tmp_path / "out" / "health"))
    per_node = {r["node"]: r for r in health.groupBy("node").agg(
        F.sum("published").alias("published"), F.sum("delivered_to").alias("delivered_to"),
        F.sum("ups").alias("ups")).collect()}
    assert per_node["sim1"]["ups"] == 1 and per_node["sim2"]["ups"] == 1
    sp = [n for n in per_node if n.startswith("sp:")]
    assert len(sp) == 1 and per_node[sp[0]]["delivered_to"] == len(lines)
