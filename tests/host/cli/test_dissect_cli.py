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


def test_trace_files_that_are_not_traces(tmp_path: Path) -> None:
    good = json.dumps({"t": 1.5, "face": "serial:x", "dir": "in",
                       "hex": VECTORS["packets"][0]["hex"]}) + "\n"
    cases = {
        "empty": b"", "text": b"hello\n", "json array": b"[1, 2]\n", "json object": b"{}\n",
        "binary": bytes(range(256)), "a record without hex": b'{"t": 1, "face": "f"}\n',
        "a bad line between records": (good + "garbage\n" + good).encode(),
        "hex that is not hex": good.replace('"hex": "', '"hex": "zz').encode(),
    }
    for what, data in cases.items():
        p = tmp_path / "trace"
        p.write_bytes(data)
        r = subprocess.run([str(BIN / "pubmote"), "dissect", "--trace", str(p)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (what, r.returncode, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "--trace %s" % p in r.stderr, (what, r.stderr)
        assert "Traceback" not in r.stderr
    for what, path in (("a folder", tmp_path), ("missing", tmp_path / "nope")):
        r = subprocess.run([str(BIN / "pubmote"), "dissect", "--trace", str(path)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "--trace" in r.stderr, (what, r.stderr)
    # a real trace with the torn last line a crash leaves: every record shown
    p = tmp_path / "trace"
    p.write_text(good + good + good[: len(good) // 2])
    r = subprocess.run([str(BIN / "pubmote"), "dissect", "--trace", str(p)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.count(" <- serial:x ") == 2, r.stdout + r.stderr
