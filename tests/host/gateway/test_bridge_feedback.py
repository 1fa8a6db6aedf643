"""What `pubmote bridge --no-view` tells its user while it runs: a serial port
that does not open, garbage on the SP SUB endpoint, status lines, the summary at exit;
-vv shows every message where -v does not. Plus the SP endpoints' defaults."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import free_port
from pubmote_wire import sp

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def _wait_log(log: Path, needle: str, timeout_s: float = 30, count: int = 1) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if text.count(needle) >= count:
            return text
        time.sleep(0.05)
    raise AssertionError("%r (x%d) not in the bridge's log within %g s:\n%s"
                         % (needle, count, timeout_s, text[-3000:]))


def _sp_pub(port: int, bodies: list[bytes], timeout_s: float = 30) -> None:
    """One SP PUB connection to the bridge's SUB endpoint sending `bodies`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with s:
        s.sendall(sp.header(sp.PUB) + b"".join(sp.encode_msg(b) for b in bodies))
        # the bridge sends its header back: read it, so our bytes were taken
        got = b""
        while len(got) < 8:
            chunk = s.recv(8 - len(got))
            if not chunk:
                break
            got += chunk


@pytest.mark.parametrize("verbosity", ["-v", "-vv"])
def test_no_view_tells_what_is_wrong_and_what_happens(tmp_path: Path, verbosity: str) -> None:
    pub, subp = free_port(), free_port()
    log = tmp_path / "bridge.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([PUBMOTE, "bridge", "--no-view", verbosity, "--serial",
                              "/dev/ttyNOPE7", "--sp-pub", "tcp://127.0.0.1:%d" % pub,
                              "--sp-sub", "tcp://127.0.0.1:%d" % subp, "--status-every", "0.3"],
                             stdout=out, stderr=subprocess.STDOUT)
    try:
        # the wrong port, said at once, with what to do
        _wait_log(log, "serial /dev/ttyNOPE7: cannot open: no such port")
        text = _wait_log(log, "down: serial:/dev/ttyNOPE7 (cannot open")  # in the status
        assert "ls /dev/ttyUSB*" in text
        # garbage on the SP SUB endpoint: each kind logged with what to send instead
        for i, body in enumerate([b"nonsense-without-separator", b"|x", b"/bad%zz|x"]):
            _sp_pub(subp, [body])
            text = _wait_log(log, "dropped 1 bad message(s)", count=i + 1)
        assert "no | between topic and payload" in text
        assert "the topic does not start with /" in text
        assert "not an NDN name URI" in text
        assert "send <topic URI>|<payload>" in text
        _sp_pub(subp, [b"/feedback/topic|hello"])
        text = _wait_log(log, "1 received, 3 bad")  # the status line counts both
        if verbosity == "-vv":
            _wait_log(log, "message /feedback/topic from sp:")
        else:
            assert "message /feedback/topic" not in text
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 130
        text = log.read_text()
        summary = [line for line in text.splitlines() if " summary: " in line]
        assert len(summary) == 1, text[-2000:]
        assert "messages 1" in summary[0] and "1 received, 3 bad" in summary[0], summary
        assert "Traceback" not in text
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sp_defaults_on_the_command_line_only(tmp_path: Path) -> None:
    from pubmote.gateway.config import load_config

    cfg = load_config(None, {}, sp_defaults=True)
    assert cfg["sp_pub"] == ["tcp://127.0.0.1:5560"]
    assert cfg["sp_sub"] == ["tcp://127.0.0.1:5561"]
    cfg = load_config(None, {"sp_pub": ["none"], "sp_sub": ["none"]}, sp_defaults=True)
    assert cfg["sp_pub"] == [] and cfg["sp_sub"] == []
    cfg = load_config(None, {"sp_pub": ["tcp://127.0.0.1:1"]}, sp_defaults=True)
    assert cfg["sp_pub"] == ["tcp://127.0.0.1:1"] and cfg["sp_sub"] == ["tcp://127.0.0.1:5561"]
    conf = tmp_path / "gw.toml"
    conf.write_text('sp_pub = "none"\nsp_sub = "ipc:///tmp/x"\n')
    cfg = load_config(str(conf), {}, sp_defaults=True)
    assert cfg["sp_pub"] == [] and cfg["sp_sub"] == ["ipc:///tmp/x"]
    # a library user (and every in-process test bridge) binds only what it names
    cfg = load_config(None, {})
    assert cfg["sp_pub"] == [] and cfg["sp_sub"] == []
    help_text = subprocess.run([PUBMOTE, "bridge", "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    assert "tcp://127.0.0.1:5560" in help_text and "--sp-pub none" in help_text


def test_test_and_bench_bridges_never_take_the_default_sp_ports() -> None:
    # tests run in parallel beside `make run`: every bridge they start on the command line
    # names both SP endpoints (a port of its own, or none)
    root = Path(__file__).resolve().parents[3]
    offenders = []
    for f in sorted([*root.glob("tests/**/*.py"), *root.glob("bench/**/*.py")]):
        text = f.read_text()
        for i, line in enumerate(text.splitlines()):
            if '"bridge", "--' not in line and '"bridge",' not in line.rstrip()[-10:]:
                continue
            window = "\n".join(text.splitlines()[i:i + 8])
            if "--help" in window or f.name in ("test_cli_mistakes.py", "test_bridge_cli.py"):
                continue
            if not ('"--sp-pub"' in window and '"--sp-sub"' in window):
                offenders.append("%s:%d" % (f.relative_to(root), i + 1))
    assert not offenders, offenders


def test_view_shows_why_a_port_is_down() -> None:
    import asyncio

    from rich.console import Console

    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config
    from pubmote.gateway.view import render

    async def run() -> str:
        async with Bridge(load_config(None, {"serial": ["/dev/ttyNOPE8"]})) as bridge:
            deadline = time.monotonic() + 30
            while not bridge.faces[0].last_error:
                assert time.monotonic() < deadline, "the open error was never recorded"
                await asyncio.sleep(0.02)
            console = Console(record=True, width=200)
            console.print(render(bridge))
            return console.export_text()

    text = asyncio.run(run())
    assert "serial:/dev/ttyNOPE8" in text and "down (cannot open: no such port" in text, text
