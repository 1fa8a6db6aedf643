"""Board authentication end to end: simulated boards with the right key, no key and a
wrong key publish into a realm that requires signing; replayed and stale packets injected
into a line are refused; keys never reach the logs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import faults
from pubmote.core.auth import key_for_board


def test_only_signed_fresh_packets_of_known_boards_enter_a_signed_realm(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    r = asyncio.run(faults.auth_realm(tmp_path))
    got = r["delivered"]
    assert got and all(t == b"/test/sim1/seq" for t in got), got[:5]
    assert r["sim3_published"] == 0
    for reason in ("unsigned", "register_rejected", "replayed", "stale", "bad_signature"):
        assert r["rejected"][reason] >= 1, r["rejected"]
    text = caplog.text
    assert "rejected notify from board sim2: unsigned (1 so far)" in text
    assert "rejected registration from board sim3: bad_signature" in text
    for key in r["keys"] + [key_for_board(str(tmp_path / "keys.json"), "sim3").hex()]:
        assert key not in text and key.upper() not in text
    assert oct((tmp_path / "keys.json").stat().st_mode & 0o777) == "0o600"
