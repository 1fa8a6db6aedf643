"""The PIT under Interests from hostile NDN apps: a producer app registers a prefix it
never answers, flooders fill the PIT with maximum-lifetime Interests for it, and one
aggregates a single name under tens of thousands of nonces. The hub's own Interests (its
deliveries of commands to boards) never wait for room, an Interest's lifetime is capped,
what a face put in the PIT leaves with it, and the nonces kept per entry are bounded; the
bridge's memory stays within what the limits imply. A genuine simulated board is served
during the flood and within 10 s of the attackers leaving, nothing it saw acked lost.
The scenarios: tests/adversarial/scenarios/tables.py."""

from __future__ import annotations

from pathlib import Path

from attackers import genuine_served, run
from scenarios import tables


def test_pit_flood_blocks_no_command_and_leaves_with_its_faces(tmp_path: Path) -> None:
    """Commands to the board are delivered through the flood; the flooders' entries go
    when they disconnect (within the recovery) and, when they stay, at the lifetime cap
    (the scenario waits for both)."""
    r = run(tables.pit_flood(tmp_path))
    genuine_served(r)
    assert r["pit_under_flood"] <= 512 + 64, r  # + the hub's own, a few
    hits = r["hits"]
    assert hits["pit_max_per_face"] > 0 and hits["pit_max"] > 0, hits
    assert hits["pit_max_lifetime_ms"] > 0, hits


def test_pit_nonces_are_bounded(tmp_path: Path) -> None:
    r = run(tables.pit_nonces(tmp_path))
    genuine_served(r)
    assert 0 < r["nonces_kept"] <= 8, r
    assert r["heap_grown_kb"] < 128, "the nonce flood grew the heap by %d KiB" % r["heap_grown_kb"]
    assert r["hits"]["pit_max_nonces"] > 0, r["hits"]
