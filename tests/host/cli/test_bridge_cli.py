"""`pubmote bridge` as users run it: the live view shows boards and topics, Ctrl-C stops
the bridge and every simulated board, bad flags and configs give one clear line."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from pubmote import procs

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def _alive(pid: int) -> bool:
    try:
        state = Path("/proc/%d/stat" % pid).read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _read_pty(master: int, seconds: float) -> bytes:
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    return out


def test_view_in_a_terminal_then_ctrl_c_leaves_nothing_behind(tmp_path: Path) -> None:
    """What `make run` does: the view in a real terminal (a pty here), then Ctrl-C."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    p = subprocess.Popen([PUBMOTE, "bridge", "--sim-boards", "2", "--sim-period-ms", "300",
                          "--sim-dir", str(tmp_path / "sim"), "--sp-pub", "none",
                          "--sp-sub", "none"],
                         stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                         env=dict(os.environ, COLUMNS="160", LINES="50"))
    os.close(slave)
    try:
        screen = b""
        deadline = time.monotonic() + 120  # two boards booting on loaded cores
        while time.monotonic() < deadline:
            screen += _read_pty(master, 0.5)
            if b"/pubmote/demo/sim2/temperature" in screen and b"celsius" in screen:
                break
        text = screen.decode(errors="replace")
        assert "/pubmote/demo/sim1/temperature" in text, text[-3000:]
        assert "/pubmote/demo/sim2/temperature" in text
        assert "celsius" in text  # last values decoded from CBOR
        boards = procs.children(p.pid)
        assert len(boards) == 2 and all(_alive(b) for b in boards)
        p.send_signal(signal.SIGINT)
        _read_pty(master, 0.5)
        assert p.wait(15) == 130  # interrupted, as a shell reports Ctrl-C
        for b in boards:
            deadline = time.monotonic() + 5
            while _alive(b) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(b), "simulated board %d outlived the bridge" % b
        assert not list((tmp_path / "sim").glob("*.tty")), "ptys left behind"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)


@pytest.mark.parametrize("args, message", [
    ([], "no boards"),
    (["--config", "/nonexistent.toml"], "no such file"),
    (["--sim-boards", "2", "--sp-pub", "http://x"], "tcp://HOST:PORT"),
])
def test_bad_invocations_one_clear_line(args: list[str], message: str) -> None:
    p = subprocess.run([PUBMOTE, "bridge", "--no-view", *args], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def test_config_file_and_flags_override(tmp_path: Path) -> None:
    from pubmote.gateway.config import load_config

    conf = tmp_path / "gw.toml"
    conf.write_text('[bridge]\ngateway = "gw7"\nsim_boards = 3\nsp_pub = "tcp://127.0.0.1:1"\n')
    cfg = load_config(str(conf), {"sim_boards": 1, "serial": []})
    assert cfg["gateway"] == "gw7" and cfg["sim_boards"] == 1
    assert cfg["sp_pub"] == ["tcp://127.0.0.1:1"]
    conf.write_text('gatway = "typo"\n')
    with pytest.raises(ValueError, match="gatway"):
        load_config(str(conf), {})


def test_help_documents_every_flag() -> None:
    import argparse

    from pubmote.cli.main import build_parser

    p = subprocess.run([PUBMOTE, "bridge", "--help"], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, COLUMNS="200"))
    assert p.returncode == 0, p.stderr
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = [a for a in sub.choices["bridge"]._actions if a.option_strings and a.dest != "help"]
    assert len(flags) > 30
    for a in flags:
        assert a.help and a.help != argparse.SUPPRESS, a.option_strings  # each says what it does
        assert max(a.option_strings, key=len) in p.stdout, a.option_strings


def test_endpoints_say_so_when_reachable_from_other_hosts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import logging

    from e2e import free_port
    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config

    caplog.set_level(logging.INFO)

    async def run(host: str) -> None:
        cfg = load_config(None, {
            "sp_pub": ["tcp://%s:%d" % (host, free_port())],
            "ndn_face": ["tcp://%s:%d" % (host, free_port())],
            # beyond loopback an NDN face needs its allow-lists (docs/security.md)
            "ndn_allow_from": ["127.0.0.1"], "ndn_allow_prefixes": ["/app"]})
        async with Bridge(cfg):
            pass

    asyncio.run(run("127.0.0.1"))
    assert "reachable from other hosts" not in caplog.text
    asyncio.run(run("0.0.0.0"))
    assert caplog.text.count("reachable from other hosts") == 2
