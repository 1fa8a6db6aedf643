"""What the SP PUB endpoint says it did with each message matches what its subscribers'
sockets took: a subscriber still in its SP handshake misses what is relayed meanwhile,
and each miss is counted and journaled "dropped"; a message is journaled "delivered"
only once its bytes have left the host, so a subscriber that reads nothing and resets
shows what it never got as "dropped", each message once. A genuine simulated board is
served throughout, nothing it saw acked lost. The scenarios:
tests/adversarial/scenarios/accounting.py."""

from __future__ import annotations

from pathlib import Path

from attackers import genuine_served, run
from scenarios import accounting


def test_messages_missed_in_the_handshake_are_counted_drops(tmp_path: Path) -> None:
    r = run(accounting.sp_handshake(tmp_path))
    genuine_served(r)
    n = r["relayed"]
    assert r["missed_counted"] >= n, "%d of %d messages missed in the handshake counted" % (
        r["missed_counted"], n)
    assert r["journaled"] == {"dropped": n}, r["journaled"]
    assert r["dropped_handshake"] >= n, r


def test_delivered_means_written_and_a_reset_subscribers_losses_are_drops(
        tmp_path: Path) -> None:
    r = run(accounting.sp_reset(tmp_path))
    genuine_served(r)
    n = r["relayed"]
    assert r["reader_journaled"].get("delivered", 0) == n, r["reader_journaled"]
    got = r["mute_journaled"]
    assert got.get("delivered", 0) + got.get("dropped", 0) == n, got
    assert got.get("delivered", 0) < n // 4, got
    assert r["dropped_lost"] >= n - n // 4, r
