"""Stopping the bridge (SIGINT, SIGTERM) while a board publishes loses nothing it acked:
the real `pubmote bridge` command, a board on UDP publishing every 5 ms and logging every
seq it saw acked, a subscriber that reads everything and one that reads nothing (so the
stop waits for it, up to its bound, while the board keeps publishing). After each stop,
every acked message reached the reading subscriber and is in the journal; exit status 130
after SIGINT, 0 after SIGTERM. The scenario: tests/adversarial/scenarios/stops.py."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from scenarios import stops

STOPS = 2  # per signal


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 0)],
                         ids=["SIGINT", "SIGTERM"])
def test_stop_loses_nothing_acked(tmp_path: Path, sig: int, status: int) -> None:
    for n in range(STOPS):
        r = asyncio.run(stops.stop_under_load(tmp_path / ("stop%d" % n), sig=sig))
        assert r["acked"] > 300, r  # the board was publishing up to the stop
        assert r["acked_lost"] == 0, r["lost_examples"]
        assert r["not_journaled"] == [] and r["journal_in_order"], r
        assert r["part_files"] == [], r  # every journal file put in place at the stop
        assert r["rc"] == status and not r["traceback"], r
        assert r["waited_for_unread"], r  # the stop did wait, the board publishing meanwhile
        assert r["within_bound"], r  # the bridge process's memory
