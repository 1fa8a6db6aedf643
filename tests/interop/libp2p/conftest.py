"""Fixtures for the libp2p interop tests: one event loop per module, real peers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from libp2p_peers import LoopRunner


@pytest.fixture(scope="module")
def runner() -> Iterator[LoopRunner]:
    r = LoopRunner()
    yield r
    r.close()
