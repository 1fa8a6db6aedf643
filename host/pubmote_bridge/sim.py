"""Old import path of the simulated boards, kept only for tests/pipeline/test_bridge_run.py
until the pipeline moves into pubmote (then: `from pubmote.boards.fleet import SimFleet`)."""

from pubmote.boards.fleet import SimFleet

__all__ = ["SimFleet"]
