"""Ctrl-C, as a terminal sends it (SIGINT to the command's whole process group), at
start-up and in the middle of the work of every long-running `pubmote` command: exit
status 130, no traceback, every child process it started ended, and a summary where the
command counts something. "Start-up" is as soon as the command has spent a little CPU
time (inside its imports and set-up); "mid-work" is when its output (or the peer the
test plays) shows the work going on."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import free_port
from pubmote import procs

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
STARTUP_CPU_S = 0.1  # CPU seconds: past the interpreter's own start (0.04 s), inside pubmote's
STARTED_S = 90.0  # generous: a loaded machine
SLOW_STARTED_S = 240.0  # Spark's JVM and its first batch beside the suite's heaviest tests
STOP_S = 60.0  # an orderly stop (Spark's included) within this


def _stat(pid: int) -> list[str] | None:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _cpu_s(pid: int) -> float:
    st = _stat(pid)
    return 0.0 if st is None else (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def as_from_a_terminal() -> None:
    """SIGINT as a shell hands it to a command it starts in the foreground: default, not
    blocked. An ignored or blocked SIGINT is inherited across exec, and a pytest worker may
    have one (seen: every Ctrl-C test after some point on one worker of a loaded full run
    found its command deaf to SIGINT, while the same tests pass on their own)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


class Run:
    """A `pubmote` command in a process group of its own, its output collected."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.p = subprocess.Popen([PUBMOTE, *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                                  env=dict(os.environ, **(env or {})),
                                  # signal.pthread_sigmask: no Popen argument for it
                                  preexec_fn=as_from_a_terminal)  # noqa: PLW1509
        self.out = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.children: set[int] = set()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for chunk in iter(lambda: self.p.stdout.read1(65536), b""):  # type: ignore[union-attr]
            with self._lock:
                self.out += chunk

    def text(self) -> str:
        with self._lock:
            return self.out.decode(errors="replace")

    def wait_for(self, started: Callable[[Run], bool], what: str,
                 within_s: float = STARTED_S) -> None:
        deadline = time.monotonic() + within_s
        while not started(self):
            assert self.p.poll() is None, "ended (%s) before %s:\n%s" % (
                self.p.returncode, what, self.text()[-3000:])
            assert time.monotonic() < deadline, "no %s within %.0f s:\n%s" % (
                what, within_s, self.text()[-3000:])
            time.sleep(0.02)

    def ctrl_c(self) -> int:
        self.children = set(procs.descendants(self.p.pid))
        os.killpg(self.p.pid, signal.SIGINT)
        try:
            return self.p.wait(STOP_S)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running %.0f s after Ctrl-C:\n%s"
                                 % (STOP_S, self.text()[-3000:])) from None

    def close(self) -> None:
        for pid in [self.p.pid, *self.children]:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.p.wait(10)
        self._reader.join(10)


def printed(pattern: str) -> Callable[[Run], bool]:
    rx = re.compile(pattern)
    return lambda r: rx.search(r.text()) is not None


def used_cpu(r: Run) -> bool:
    return _cpu_s(r.p.pid) >= STARTUP_CPU_S


def check_stopped(r: Run, code: int, summary: str | None) -> None:
    r._reader.join(10)
    text = r.text()
    assert code == 130, "exit %s after Ctrl-C:\n%s" % (code, text[-3000:])
    assert "Traceback" not in text, text[-3000:]
    deadline = time.monotonic() + 20
    while any(_alive(c) for c in r.children):
        assert time.monotonic() < deadline, "children %s outlived Ctrl-C" % sorted(
            c for c in r.children if _alive(c))
        time.sleep(0.05)
    if summary is not None:
        assert re.search(summary, text), "no summary %r:\n%s" % (summary, text[-2000:])


class Peer:
    """A loopback TCP peer the clients talk to: it sends `greeting` to each connection
    and counts what it receives; nothing else."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.received = 0
        self.connected = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            c.sendall(self.greeting)
            self.connected.set()
            threading.Thread(target=self._drain, args=(c,), daemon=True).start()

    def _drain(self, c: socket.socket) -> None:
        while True:
            try:
                data = c.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.received += len(data)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def _sp_header(kind: str) -> bytes:
    from pubmote_wire import sp

    return bytes(sp.header(getattr(sp, kind)))


def _fake_micropython(root: Path) -> Path:
    """A MicroPython tree whose first build step (mpy-cross) runs until it is stopped."""
    tree = root / "mp"
    (tree / "py").mkdir(parents=True)
    (tree / "py" / "mpconfig.h").write_text("/* fake */\n")
    (tree / "ports" / "rp2" / "boards" / "RPI_PICO").mkdir(parents=True)
    (tree / "lib" / "pico-sdk").mkdir(parents=True)
    (tree / "lib" / "pico-sdk" / "README.md").write_text("fake\n")
    (tree / "mpy-cross").mkdir()
    (tree / "mpy-cross" / "Makefile").write_text("all:\n\tsleep 600\n")
    return tree


# command -> (arguments, the peers and files it needs, "mid-work" condition, summary)
Setup = Callable[[Path], tuple[list[str], Callable[[Run], bool], str | None, list[Any]]]


def _bridge(tmp: Path) -> Any:
    return (["bridge", "--no-view", "--sim-boards", "1", "--sp-pub", "none", "--sp-sub",
             "none", "--sim-dir", str(tmp / "sim"), "--status-every", "1"],
            printed(r"status: .*sim1"), r"summary: ", [])


def _sim(tmp: Path) -> Any:
    return ["sim", "--dir", str(tmp / "sim"), "--boards", "1"], printed(r"sim1 \S+"), None, []


def _simdev(tmp: Path) -> Any:
    return ["simdev", "--dir", str(tmp / "dev")], printed(r"tty \S+"), None, []


def _sub(tmp: Path) -> Any:
    peer = Peer(_sp_header("PUB"))  # an SP PUB endpoint that never publishes
    return (["sub", "tcp://127.0.0.1:%d" % peer.port],
            lambda r: peer.connected.is_set() and peer.received > 0, r"pubmote sub: 0 messages",
            [peer])


def _pub(tmp: Path) -> Any:
    peer = Peer(_sp_header("SUB"))  # an SP SUB endpoint that takes everything
    return (["pub", "tcp://127.0.0.1:%d" % peer.port, "/a/b", "hi", "--count", "1000",
             "--interval", "0.2"],
            lambda r: peer.received > 8 + 12, r"sent \d+ of 1000 messages", [peer])


def _mesh_ping(tmp: Path) -> Any:
    peer = Peer()  # accepts and stays silent: the dial waits for its handshake
    from pubmote.p2p.identity import KeyPair

    pid = KeyPair.generate().peer_id
    return (["mesh", "ping", "--timeout", "300",
             "/ip4/127.0.0.1/tcp/%d/p2p/%s" % (peer.port, pid)],
            lambda r: peer.connected.is_set(), None, [peer])


def _mesh_serve(tmp: Path) -> Any:
    return (["mesh", "serve", "--key-file", str(tmp / "mesh.key"), "--listen",
             "/ip4/127.0.0.1/tcp/0"], printed(r"listen: /ip4/"), None, [])


def _dht_node(tmp: Path) -> Any:
    return ["dht", "node", "--port", "0"], printed(r"dht node 127\.0\.0\.1:\d+"), None, []


def _dht_subscribe(tmp: Path) -> Any:
    port = free_port()
    node = subprocess.Popen([PUBMOTE, "dht", "node", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert node.stdout is not None and node.stdout.readline().startswith(b"dht node")
    return (["dht", "subscribe", "--pubkey", "77" * 32, "--bootstrap", "127.0.0.1:%d" % port],
            printed(r"joined topic"), r"0 values", [node])


def _pipeline(tmp: Path) -> Any:
    from pubmote.pipeline.synth import records, write_journal

    write_journal(tmp / "journal", records(50))
    return (["pipeline", str(tmp / "journal"), "--out", str(tmp / "tables"), "--follow",
             "--trigger-seconds", "1"], printed(r"pipeline: following "), None, [])


def _pipeline_serve(tmp: Path) -> Any:
    return (["pipeline", "serve", "--port", str(free_port()), "--master", "local[1]"],
            printed(r"listening on sc://127\.0\.0\.1:"), r"pipeline: stopped", [])


def has_child(r: Run) -> bool:
    """The command started a child (the pipeline: Spark's JVM, still starting)."""
    return bool(procs.descendants(r.p.pid))


# what "start-up" is where it is not the command's first CPU time
STARTING: dict[str, Callable[[Run], bool]] = {"pipeline": has_child,
                                              "pipeline serve": has_child}


def _firmware(tmp: Path) -> Any:
    tree = _fake_micropython(tmp)
    return (["firmware", "build", "--micropython", str(tree), "--out", str(tmp / "fw")],
            printed(r"building mpy-cross"), None, [])


COMMANDS: dict[str, Setup] = {
    "bridge": _bridge, "sim": _sim, "simdev": _simdev, "sub": _sub, "pub": _pub,
    "mesh ping": _mesh_ping, "mesh serve": _mesh_serve, "dht node": _dht_node,
    "dht subscribe": _dht_subscribe, "pipeline": _pipeline,
    "pipeline serve": _pipeline_serve, "firmware build": _firmware,
}
SLOW = {"pipeline", "pipeline serve"}  # Spark's JVM: tens of seconds on a loaded machine


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PUBMOTE_BUILD_DIR": str(tmp_path / "build"),
            "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}


def _params() -> Iterator[Any]:
    for name in COMMANDS:
        for moment in ("start-up", "mid-work"):
            marks = [pytest.mark.early, pytest.mark.timeout(SLOW_STARTED_S + STOP_S + 100)
                     ] if name in SLOW else []
            yield pytest.param(name, moment, id="%s at %s" % (name, moment), marks=marks)


@pytest.mark.parametrize(("name", "moment"), list(_params()))
def test_ctrl_c(name: str, moment: str, tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "home").mkdir()
    args, working, summary, peers = COMMANDS[name](tmp_path)
    r = Run(args, tmp_path, env)
    within_s = SLOW_STARTED_S if name in SLOW else STARTED_S
    try:
        if moment == "start-up":
            r.wait_for(STARTING.get(name, used_cpu), "start-up", within_s)
            summary = None  # it may not have counted anything yet
        else:
            r.wait_for(working, "work", within_s)
        check_stopped(r, r.ctrl_c(), summary)
    finally:
        r.close()
        for p in peers:
            if isinstance(p, subprocess.Popen):
                p.terminate()
                p.wait(10)
            else:
                p.close()
