"""The stored python-ndn vectors are what python-ndn makes today: the generator, run again
with the installed python-ndn, writes the same file (tests/shared/test_peer_vectors.py
compares our codec with it on every runtime)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_python_ndn_vectors_are_python_ndn_output(tmp_path: Path) -> None:
    out = tmp_path / "again.json"
    subprocess.run([sys.executable, str(ROOT / "tests/vectors/gen/python_ndn_hmac.py"), str(out)],
                   check=True, capture_output=True, timeout=60)
    assert out.read_text() == (ROOT / "tests/vectors/python_ndn_hmac.json").read_text()
