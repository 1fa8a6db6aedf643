"""What the bridge says about itself: `--no-view`'s start-up line lists every listener as
bound (board TCP/UDP, NDN, SP, serial, mesh, DHT); mesh peers joining and leaving are
logged; the status line carries the NDN, mesh and DHT figures; a simulated board whose app
crashed is "crashed: <its last error line>" in the status line and in the view, with its
log kept after exit; the view counts bad SP messages per endpoint."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pubmote_wire import sp

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
CRASHY = "async def main(node):\n    raise RuntimeError('sensor on fire')\n"


def _wait(log: Path, pattern: str, timeout_s: float = 60) -> re.Match[str]:
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        m = rx.search(text)
        if m:
            return m
        time.sleep(0.05)
    raise AssertionError("%r not in the log within %g s:\n%s" % (pattern, timeout_s,
                                                                 text[-4000:]))


def _stop(p: subprocess.Popen[bytes]) -> int:
    p.send_signal(signal.SIGINT)
    try:
        return p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_start_up_line_lists_every_listener_and_the_status_line_every_part(
        tmp_path: Path) -> None:
    serve_log = tmp_path / "serve.log"
    with open(serve_log, "wb") as out:
        peer = subprocess.Popen([PUBMOTE, "mesh", "serve", "--listen", "/ip4/127.0.0.1/tcp/0",
                                 "--key-file", str(tmp_path / "peer.key")],
                                stdout=out, stderr=subprocess.STDOUT)
    bridge = None
    try:
        peer_addr = _wait(serve_log, r"listen: (/ip4/127\.0\.0\.1/tcp/\d+/p2p/(\w+))")
        conf = tmp_path / "gw.toml"
        conf.write_text('retained = ["/site/temp"]\ndht_key_file = "%s"\n'
                        % (tmp_path / "dht.key"))
        log = tmp_path / "bridge.log"
        with open(log, "wb") as out:
            bridge = subprocess.Popen(
                [PUBMOTE, "bridge", "--no-view", "--config", str(conf), "--status-every", "0.5",
                 "--tcp", "127.0.0.1:0", "--udp", "127.0.0.1:0",
                 "--ndn-face", "tcp://127.0.0.1:0", "--ndn-face",
                 "unix://%s" % (tmp_path / "nfd.sock"),
                 "--sp-pub", "tcp://127.0.0.1:0", "--sp-sub", "ipc://%s" % (tmp_path / "sub"),
                 "--serial", "/dev/ttyNOPE9", "--mesh-listen", "/ip4/127.0.0.1/tcp/0",
                 "--mesh-key-file", str(tmp_path / "gw.key"), "--mesh-peer", peer_addr[1]],
                stdout=out, stderr=subprocess.STDOUT)
        up = _wait(log, r"bridge up: .*")[0]
        ports = {}
        for what, rx in [("tcp", r"TCP boards 127\.0\.0\.1:(\d+)"),
                         ("udp", r"UDP boards 127\.0\.0\.1:(\d+)"),
                         ("ndn", r"NDN tcp://127\.0\.0\.1:(\d+)"),
                         ("sp", r"SP PUB tcp://127\.0\.0\.1:(\d+)"),
                         ("mesh", r"mesh /ip4/127\.0\.0\.1/tcp/(\d+)/p2p/\w+"),
                         ("dht", r"DHT udp 127\.0\.0\.1:(\d+)")]:
            m = re.search(rx, up)
            assert m and int(m[1]) > 0, (what, up)  # the port it got, not the 0 asked for
            ports[what] = int(m[1])
        assert "NDN unix://%s" % (tmp_path / "nfd.sock") in up, up
        assert "SP SUB ipc://%s" % (tmp_path / "sub") in up and "serial /dev/ttyNOPE9" in up
        for what in ("tcp", "ndn", "sp", "mesh"):  # they are what is bound
            socket.create_connection(("127.0.0.1", ports[what]), timeout=10).close()
        # a peer joining is logged; the status line counts it, the NDN apps, the DHT
        _wait(log, r"mesh: peer %s joined" % peer_addr[2])
        app = socket.create_connection(("127.0.0.1", ports["ndn"]), timeout=10)
        try:
            status = _wait(log, r"status: .*NDN tcp://127\.0\.0\.1:%d: 1 apps.*" % ports["ndn"])[0]
            assert re.search(r"mesh: 1 peers, \d+ out, \d+ in", status), status
            assert re.search(r"DHT: \d+ nodes known, 1 topics", status), status
        finally:
            app.close()
        # and leaving
        peer.send_signal(signal.SIGTERM)
        peer.wait(30)
        _wait(log, r"mesh: peer %s left; 0 peers" % peer_addr[2])
        assert _stop(bridge) == 130
        assert "Traceback" not in log.read_text()
    finally:
        for p in (peer, bridge):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


# what each kind of simulated board shows of the crash: the unix port's traceback in its
# log; the real rp2 firmware in the emulator, where the app's exception ends main.py and
# the board sits at its REPL (the emulator runs on), which is a crash too
CRASH_LOGS = {"unix": "sensor on fire",
              "pico": 'File "/lib/crashy.py", line 2, in main'}


@pytest.mark.parametrize("kind", sorted(CRASH_LOGS))
def test_a_crashed_simulated_board_says_why_and_its_log_is_kept(tmp_path: Path,
                                                                kind: str) -> None:
    if kind == "pico":
        from pubmote.boards import fwbuild

        fwbuild.build("pico", progress=lambda line: None)  # cached: a copy when unchanged
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "crashy.py").write_text(CRASHY)
    log = tmp_path / "bridge.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([PUBMOTE, "bridge", "--no-view", "--sim-boards", "1",
                              "--sim-kind", kind, "--sim-app", "crashy", "--sim-app-dir",
                              str(apps), "--status-every", "0.5", "--sp-pub", "none",
                              "--sp-sub", "none"], stdout=out, stderr=subprocess.STDOUT)
    kept = None
    try:
        status = _wait(log, r"status: .*crashed.*", 90)[0]
        assert "down: serial:sim1.tty (crashed: RuntimeError: sensor on fire)" in status
        assert "not registered" not in status and "boards up 0" in status
        # said as it is seen, with where the log is (the view's last warnings show it)
        _wait(log, r"WARNING simulated board sim1 crashed \(RuntimeError: sensor on fire\); "
                   r"its log: \S+/sim1\.log \(kept when the bridge stops\)")
        assert _stop(p) == 130
        m = _wait(log, r"simulated board sim1 crashed \(RuntimeError: sensor on fire\); "
                       r"its log, kept: (\S+)")
        kept = Path(m[1])
        assert CRASH_LOGS[kind] in kept.read_text()  # after the temporary folder went
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if kept is not None:
            kept.unlink(missing_ok=True)


def test_the_view_shows_a_crashed_board_and_bad_sp_messages(tmp_path: Path) -> None:
    from rich.console import Console

    from pubmote.boards.fleet import SimFleet
    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config
    from pubmote.gateway.view import render

    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "crashy.py").write_text(CRASHY)
    cfg = load_config(None, {"sim_boards": 1, "sim_app": "crashy", "sim_app_dir": str(apps),
                             "sim_dir": str(tmp_path / "sim"),
                             "sp_sub": ["tcp://127.0.0.1:0"]})

    async def run() -> str:
        fleet = SimFleet.from_config(cfg)
        async with Bridge(cfg, fleet=fleet) as bridge:
            port = bridge.sp[0].server.sockets[0].getsockname()[1]
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(sp.header(sp.PUB) + sp.encode_msg(b"no separator here"))
            await w.drain()
            deadline = time.monotonic() + 60
            while not fleet.crashed() or not bridge.sp[0].counters["bad_messages"]:
                assert time.monotonic() < deadline, "no crash or no bad message seen"
                await asyncio.sleep(0.05)
            w.close()
            console = Console(record=True, width=240)
            console.print(render(bridge))
            return console.export_text()

    text = asyncio.run(run())
    assert "crashed: RuntimeError: sensor on fire" in text, text
    assert "not registered" not in text
    assert re.search(r"SUB tcp://127\.0\.0\.1:0: 1 clients, .*1 bad", text), text


def test_a_board_that_registered_then_crashed_is_shown_crashed(tmp_path: Path) -> None:
    from rich.console import Console

    from pubmote.boards.fleet import SimFleet
    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config
    from pubmote.gateway.view import render

    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "late.py").write_text(
        "import asyncio\n\n\nasync def main(node):\n    asyncio.create_task(node.run())\n"
        "    for _ in range(40):\n"
        "        await node.publish('/pubmote/late/' + node.name + '/x', b'1')\n"
        "        await asyncio.sleep(0.2)\n"
        "    raise RuntimeError('sensor on fire later')\n")
    cfg = load_config(None, {"sim_boards": 1, "sim_app": "late", "sim_app_dir": str(apps),
                             "sim_dir": str(tmp_path / "sim")})

    async def run() -> tuple[str, str]:
        fleet = SimFleet.from_config(cfg)
        async with Bridge(cfg, fleet=fleet) as bridge:
            deadline = time.monotonic() + 60
            while not bridge.hub.board_infos():  # it registers, publishes for 8 s, then raises
                assert time.monotonic() < deadline, "the board did not register"
                await asyncio.sleep(0.05)
            while not fleet.crashed():
                assert time.monotonic() < deadline, "no crash seen"
                await asyncio.sleep(0.05)
            console = Console(record=True, width=240)
            console.print(render(bridge))
            return console.export_text(), bridge.status()

    text, status = asyncio.run(run())
    assert re.search(r"sim1 .*crashed: RuntimeError: sensor on fire later", text), text
    assert "boards up 0: -" in status, status
    assert "down: serial:sim1.tty (crashed: RuntimeError: sensor on fire later)" in status
