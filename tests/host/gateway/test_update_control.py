"""The bridge's control endpoint for `pubmote update`: a unix socket of mode 0600 in a
folder of mode 0700, removed when the bridge stops; a second bridge on the same path runs
without one; one left by a dead bridge is replaced, a file that is not a socket is never
touched. The CLI's mistakes are one line and exit status 2: no bridge running, an unknown
board, a bad --app folder."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
from pathlib import Path

from e2e import APPS
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config


def _cfg() -> dict[str, object]:
    return load_config(None, {"allow_anonymous_boards": True})


async def _cli(*args: str) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pubmote", "update", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 60)
    assert p.returncode is not None
    return p.returncode, out.decode(), err.decode()


def test_the_endpoint_is_private_and_one_per_path() -> None:
    path = Path(os.environ["PUBMOTE_CONTROL"])

    async def run() -> None:
        async with Bridge(_cfg()) as first:
            assert first.control is not None
            assert stat.S_ISSOCK(path.lstat().st_mode)
            assert stat.S_IMODE(path.lstat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            async with Bridge(_cfg()) as second:
                assert second.control is None  # the first one keeps answering
                code, out, _ = await _cli("--status")
                assert code == 0 and out.strip() == "no boards", out
        assert not path.exists()

    asyncio.run(run())


def test_a_dead_bridges_socket_is_replaced_a_file_is_not_touched() -> None:
    path = Path(os.environ["PUBMOTE_CONTROL"])
    path.parent.mkdir(mode=0o700, exist_ok=True)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # bound, never listening: what a killed bridge leaves

    async def run() -> None:
        async with Bridge(_cfg()) as bridge:
            assert bridge.control is not None
            assert (await _cli("--status"))[0] == 0
        path.write_text("not a socket\n")
        async with Bridge(_cfg()) as bridge:
            assert bridge.control is None
        assert path.read_text() == "not a socket\n"

    asyncio.run(run())


def test_mistakes_are_one_line(tmp_path: Path) -> None:
    good = str(APPS / "update_good")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "notes.txt").write_text("hello\n")
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.py").write_text("")
    (two / "b.py").write_text("")

    async def run() -> None:
        code, _, err = await _cli("--app", good, "sim1")
        assert code == 2 and err.count("\n") == 1 and "no bridge running" in err, err
        async with Bridge(_cfg()):
            for args, says in (
                    (["--app", good, "sim9"], "unknown board sim9"),
                    (["--app", str(bad), "sim1"], "notes.txt is not a .py"),
                    (["--app", str(two), "sim1"], "say which runs with --config app=NAME"),
                    (["--app", good], "name the boards to update, or --all"),
                    (["--app", good, "--all"], "no boards are registered"),
                    (["--status", "sim1"], "--status takes no"),
            ):
                code, _, err = await _cli(*args)
                assert code == 2 and err.count("\n") == 1 and says in err, (args, err)

    asyncio.run(run())
