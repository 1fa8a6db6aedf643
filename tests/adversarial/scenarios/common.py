"""What the scenarios share: sizes by scale, ports of URLs."""

from __future__ import annotations


def scaled(n: int, scale: float) -> int:
    """An attack's size `n` at `scale` (1: the tests' size; never below it)."""
    return max(n, round(n * scale))


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
