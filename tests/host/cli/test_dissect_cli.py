"""`pubmote dissect` on the host and `micropython -m pubmote_wire.dissect` on the unix port
print the same JSON for the same bytes, and the same one-line error for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "tests" / "vectors" / "ndn_notify.json").read_text())
BIN = Path(sys.executable).parent
BAD = ["0502", "zz", "06020701"]


def _host(hex_text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "pubmote"), "dissect", "-"], input=hex_text,
                          capture_output=True, text=True, timeout=30)


def _board(hex_text: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MICROPYPATH=".frozen:%s" % (ROOT / "shared"))
    return subprocess.run([str(BIN / "micropython"), "-m", "pubmote_wire.dissect", "-"],
                          input=hex_text, capture_output=True, text=True, timeout=30, env=env)


@pytest.mark.parametrize("packet", VECTORS["packets"], ids=lambda p: p["label"])
def test_same_json_on_both_runtimes(packet: dict[str, str]) -> None:
    host, board = _host(packet["hex"]), _board(packet["hex"])
    assert host.returncode == 0 and board.returncode == 0, (host.stderr, board.stdout)
    assert host.stdout == board.stdout
    tree = json.loads(host.stdout)
    assert tree["length"] == len(packet["hex"]) // 2


@pytest.mark.parametrize("bad", BAD)
def test_bad_input_one_line_nonzero_exit(bad: str) -> None:
    host, board = _host(bad), _board(bad)
    assert host.returncode == 1 and board.returncode == 1
    assert host.stdout == board.stdout
    assert host.stdout.startswith("error: ") and host.stdout.count("\n") == 1
