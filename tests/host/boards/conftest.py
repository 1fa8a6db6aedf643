"""Fixtures of the board tests."""

from __future__ import annotations

import pytest

from pubmote.boards import fwbuild


@pytest.fixture(scope="module")
def built() -> None:
    """The Pico firmware, cached or built (the emulated-Pico tests boot it)."""
    fwbuild.build("pico", progress=lambda line: None)
