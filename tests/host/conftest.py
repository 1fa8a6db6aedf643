"""Host tests import their helpers (e2e) from this directory; `built` is the Pico firmware
the emulated-Pico tests boot."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pubmote.boards import fwbuild


@pytest.fixture(scope="module")
def built() -> None:
    """The Pico firmware, cached or built (the emulated-Pico tests boot it)."""
    fwbuild.build("pico", progress=lambda line: None)
