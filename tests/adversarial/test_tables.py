"""Tables a peer grows by naming things: topics (through the SP SUB endpoint and from a
board's link batches), boards (fake registrations under ever new names, from one
connection and from several) and routes (registrations serving many prefixes). Each
table stays within its limit, what it evicts or refuses is counted, a new genuine board
can always register, and no refusal closes anybody's connection. A genuine simulated
board is served during each attack (nothing it saw acked lost) and within 10 s of the
attackers leaving. The scenarios: tests/adversarial/scenarios/tables.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from attackers import genuine_served, run
from scenarios import tables


@pytest.mark.timeout(400)  # a flood and a board on 2 cores the rest of the suite keeps busy
def test_unique_topics_keep_the_topic_table_bounded(tmp_path: Path) -> None:
    """10,000 unique topics: the per-topic table keeps the most recent max_topics,
    evictions counted, and the heap grows by about max_topics entries, not 10,000."""
    r = run(tables.topic_flood(tmp_path))
    genuine_served(r)
    assert r["topics_kept"] <= 256, r
    assert r["heap_grown_kb"] < 2048, "10,000 topics grew the heap by %d KiB" % r["heap_grown_kb"]
    assert r["hits"]["max_topics"] >= r["topics_sent"] - 256, r["hits"]
    assert "max_topics" in r["status"]
    assert r["view_footer"] and "max_topics" in r["view_footer"][0], r["view_footer"]


def test_fake_registrations_never_lock_new_boards_out(tmp_path: Path) -> None:
    r = run(tables.fake_registrations(tmp_path))
    genuine_served(r)
    assert r["boards_held"] <= 64 and r["boards_at_end"] <= 64, r
    assert r["genuine_up"], r  # nothing already up made room
    assert r["hits"]["max_boards"] > 0, r["hits"]


def test_route_floods_are_refused_and_counted_not_raised(tmp_path: Path) -> None:
    r = run(tables.route_flood(tmp_path))
    genuine_served(r)
    assert r["fib"] <= 1024, r
    # the WiFi board that came up meanwhile: registered, its connection never closed or
    # redialled, during the attack and after
    assert r["late_face"]["up"] and r["late_face"]["opens"] == 1, r
    assert r["late_face"]["registrations"] >= 1, r
    assert r["late_face_after"] == {"up": True, "opens": 1}, r
    assert r["internal_errors"] == 0, r
    assert r["hits"]["fib_max_per_face"] > 0 and r["hits"]["fib_max"] > 0, r["hits"]
