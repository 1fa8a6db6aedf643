"""Fault injection: a noisy serial line, power cuts mid-publish, a subscriber that never
reads, a flooding board. Nothing acked is lost; bounded buffers drop and count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import faults


def test_noisy_line_loses_nothing_acked(tmp_path: Path) -> None:
    r = asyncio.run(faults.noisy_line(tmp_path))
    assert r["bits_flipped"] > 0 and r["bytes_lost"] > 0, r  # the faults really happened
    assert r["bad_frames_at_bridge"] > 0, r
    assert r["acked"] > 100 and r["acked_lost"] == 0, r


def test_power_cut_mid_publish_loses_nothing_acked(tmp_path: Path) -> None:
    r = asyncio.run(faults.resets_mid_publish(tmp_path))
    assert r["acked"] > 100 and r["acked_lost"] == 0, r


def test_slow_subscriber_is_bounded_and_others_unaffected(tmp_path: Path) -> None:
    r = asyncio.run(faults.slow_subscriber(tmp_path))
    assert r["dropped_for_slow"] > 0, r
    assert r["delivered_to_fast"] > 100 and r["fast_gaps"] == 0, r


def test_flooding_board_does_not_starve_the_others(tmp_path: Path) -> None:
    r = asyncio.run(faults.flood_from_one_board(tmp_path))
    assert r["flood_msgs_per_s"] > 100, r
    assert r["calm_acked"] >= 60 and r["calm_lost"] == 0 and r["calm_failed"] == 0, r
