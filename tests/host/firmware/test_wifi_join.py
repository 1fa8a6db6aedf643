"""The board's WiFi join (firmware/pubmote_node/wifi.py): retries, capped jittered
back-off, link state in stats(), rejoin after a loss; the same scenario on CPython and on
the MicroPython unix port, which has no `network` module (network.WLAN is imported only
on a board)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import wifi_scenario

ROOT = Path(__file__).resolve().parents[3]


def _check(out: dict[str, Any]) -> None:
    assert out["state_before"] == "down" and out["state"] == "up"
    assert out["connects"] == [("connect", "greenhouse", "pw-12345678")] * 4
    c = out["counters"]
    assert (c["wifi_attempts"], c["wifi_joins"], c["wifi_failures"]) == (4, 1, 3), c
    assert out["pauses"] == [400, 800, 1000], out["pauses"]  # doubling, capped
    assert out["stats"]["wifi"] == "up" and out["stats"]["ip"] == "192.168.1.50"
    assert out["calls_when_up"] == 0
    assert out["connected_after_drop"] is False and out["state_after_drop"] == "down"
    assert out["state_after_rejoin"] == "up"
    c = out["counters_after_rejoin"]
    assert (c["wifi_lost"], c["wifi_joins"], c["wifi_attempts"]) == (1, 2, 5), c
    assert out["pauses_low"] == [500, 1000, 2000, 4000, 4000, 4000]
    assert out["pauses_high"] == [1000, 2000, 4000, 8000, 8000, 8000]
    assert out["open_connect"] == [("connect", "cafe")]
    assert out["no_ssid"] is True and out["empty_ssid"] == "refused"


def _check_node(out: dict[str, Any]) -> None:
    assert out["stats_before"] == "down"
    assert out["opened_with_wifi"][:1] == [True], out  # the link opened only once joined
    assert out["wifi"] == "up" and out["ip"] == "192.168.1.50" and out["wifi_failures"] == 1


def test_wifi_join_on_cpython() -> None:
    _check(wifi_scenario.scenario())
    _check_node(wifi_scenario.node_scenario())


def test_wifi_join_on_the_micropython_unix_port() -> None:
    exe = str(Path(sys.executable).parent / "micropython")
    path = ".frozen:%s:%s:%s" % (ROOT / "firmware", ROOT / "shared", ROOT / "tests" / "host")
    p = subprocess.run([exe, "-X", "heapsize=256k", str(ROOT / "tests/host/wifi_scenario.py")],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MICROPYPATH=path))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    _check(ast.literal_eval(lines["SCENARIO"]))
    _check_node(ast.literal_eval(lines["NODE"]))


def test_no_network_import_without_a_board() -> None:
    # the unix port and CPython have no `network`: importing wifi must not need it
    src = (ROOT / "firmware" / "pubmote_node" / "wifi.py").read_text()
    top = [n for n in ast.parse(src).body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all("network" not in ast.dump(n) for n in top)
    assert "import network" in src  # ... but a board imports it, lazily
