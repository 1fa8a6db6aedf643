"""The fault scenarios of tests/host/faults.py (a noisy serial line, power cuts
mid-publish, an SP subscriber that never reads, one board flooding) at a scale, with
the bridge's memory and the boards' recovery measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from measure import Measure

import faults

from .common import scaled


async def noisy_line(tmp: Path, scale: float = 1) -> dict[str, Any]:
    m = Measure()
    return m.figures(**_own(await faults.noisy_line(tmp, seconds=8 * max(1, scale), measure=m)))


async def power_cuts(tmp: Path, scale: float = 1) -> dict[str, Any]:
    m = Measure()
    return m.figures(**_own(await faults.resets_mid_publish(tmp, resets=scaled(5, scale),
                                                            measure=m)))


async def slow_subscriber(tmp: Path, scale: float = 1) -> dict[str, Any]:
    m = Measure()
    return m.figures(**_own(await faults.slow_subscriber(tmp, after=scaled(500, scale),
                                                         measure=m)))


async def board_flood(tmp: Path, scale: float = 1, seconds: float = 6) -> dict[str, Any]:
    """One board floods for `seconds` (FLOOD_SECONDS in the report; not scaled)."""
    m = Measure()
    return m.figures(**_own(await faults.flood_from_one_board(tmp, seconds=seconds,
                                                              measure=m)))


def _own(r: dict[str, Any]) -> dict[str, Any]:
    """A fault's own figures, less those the Measure keeps."""
    return {k: v for k, v in r.items() if k not in ("acked", "acked_lost", "lost_examples")}
