"""The board's Event and wait_ms (firmware face.py): the cases in event_cases.py, each
under pytest on CPython, and the whole file on the MicroPython unix port, where boards run
the firmware's own Event over asyncio's scheduler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import event_cases
import pytest

CASES = sorted(k for k in vars(event_cases) if k.startswith("test_"))
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


@pytest.mark.parametrize("case", CASES)
def test_case_on_cpython(case: str) -> None:
    getattr(event_cases, case)()


def test_every_case_on_the_micropython_unix_port() -> None:
    exe = str(Path(sys.executable).parent / "micropython")
    path = [".frozen", str(ROOT / "firmware"), str(ROOT / "shared"), str(ROOT / "tests" / "shared")]
    env = dict(os.environ, MICROPYPATH=":".join(path))
    p = subprocess.run([exe, "-X", "heapsize=256k", str(HERE / "event_cases.py")],
                       capture_output=True, text=True, timeout=120, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "RESULT micropython-64bit event_cases passed=%d failed=0" % len(CASES) in out, out
