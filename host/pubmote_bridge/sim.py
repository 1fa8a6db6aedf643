"""Old import path of the simulated boards, kept only for tests/pipeline/test_bridge_run.py
until the pipeline moves into pubmote (then: `from pubmote.boards.sim import SimFleet`)."""

from pubmote.boards.sim import SimFleet

__all__ = ["SimFleet"]
