"""The durable outbox's log (firmware outlog.py): the cases in outlog_cases.py, each under
pytest on CPython, and the whole file on the MicroPython unix port, where boards run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import outlog_cases
import pytest

CASES = sorted(k for k in vars(outlog_cases) if k.startswith("test_"))
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


@pytest.mark.parametrize("case", CASES)
def test_case_on_cpython(case: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(outlog_cases, "TMP", [str(tmp_path)])
    getattr(outlog_cases, case)()


def test_every_case_on_the_micropython_unix_port(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "micropython")
    path = [".frozen", str(ROOT / "firmware"), str(ROOT / "shared"), str(ROOT / "tests" / "shared")]
    env = dict(os.environ, MICROPYPATH=":".join(path))
    p = subprocess.run([exe, "-X", "heapsize=256k", str(HERE / "outlog_cases.py"),
                        str(tmp_path)], capture_output=True, text=True, timeout=120, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "RESULT micropython-64bit outlog_cases passed=%d failed=0" % len(CASES) in out, out
