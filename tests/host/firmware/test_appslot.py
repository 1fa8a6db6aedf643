"""The board's choice of app at boot (firmware appslot.py on CPython, in a scratch folder as
the board's filesystem): no pointer is the deployed app; an app on trial gets one boot,
and a second boot without it proving healthy rolls the pointer back to the previous app,
with the app's last error line as the report; a pointer is replaced whole or not at all."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pubmote_node import appslot


@pytest.fixture(autouse=True)
def flash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_no_pointer_is_the_deployed_app() -> None:
    assert appslot.choose() is None
    cfg = {"app": "demo"}
    assert appslot.apply(None, cfg) == {"app": "demo"}


def test_trial_gets_one_boot_then_rolls_back(flash: Path) -> None:
    appslot.write({"cur": "v2", "prev": "v1",
                   "trial": {"v": "v2", "timeout_s": 5, "grace_s": 1, "booted": 0}})
    first = appslot.choose()
    assert first is not None and first["cur"] == "v2" and first["trial"]["booted"] == 1
    assert json.loads((flash / "app.ptr").read_text())["trial"]["booted"] == 1
    appslot.note_error("ValueError: boom")
    second = appslot.choose()  # the app did not prove healthy before this boot
    assert second == {"cur": "v1", "prev": "", "report": ["v2", "rolledback",
                                                          "ValueError: boom"]}
    assert appslot.choose() == second  # settled: no trial left


def test_rollback_without_an_error_line_says_so() -> None:
    appslot.write({"cur": "v2", "prev": "", "trial": {"v": "v2", "booted": 1}})
    ptr = appslot.choose()
    assert ptr is not None and ptr["cur"] == ""
    assert ptr["report"] == ["v2", "rolledback", "restarted before it was healthy"]


def test_a_half_written_pointer_leaves_the_old_one(flash: Path) -> None:
    appslot.write({"cur": "v1", "prev": ""})
    (flash / "app.ptr.tmp").write_text('{"cur": "v2", "pr')  # the power went here
    assert appslot.read() == {"cur": "v1", "prev": ""}


def test_apply_puts_the_app_first_with_its_config(flash: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    (flash / "apps" / "v2").mkdir(parents=True)
    (flash / "apps" / "v2" / "config.json").write_text('{"app": "app", "period_ms": 500}')
    cfg = appslot.apply({"cur": "v2", "prev": ""}, {"app": "demo", "name": "b1"})
    assert cfg == {"app": "app", "period_ms": 500, "name": "b1"}
    assert sys.path[0] == "apps/v2"
