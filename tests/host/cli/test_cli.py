"""The `pubmote` command's surface: help and version."""

from __future__ import annotations

import pytest

from pubmote.cli import main as cli


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert "pubmote 0.1.0" in capsys.readouterr().out
