"""`pubmote dht`: help text, keygen, put then get (and a subscriber that sees the put
pushed) through a `pubmote dht node` process on loopback; bad arguments are exit 2."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import free_port
from pubmote.cli.main import build_parser, main

CLI = [sys.executable, "-m", "pubmote", "dht"]


def _readline(p: subprocess.Popen[str], stream: str = "stdout", timeout_s: float = 15) -> str:
    f = getattr(p, stream)
    with selectors.DefaultSelector() as sel:
        sel.register(f, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise AssertionError("no line from the process within %.0f s" % timeout_s)
    return str(f.readline())


def _run(*args: str, timeout_s: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout_s)


def test_help_lists_actions_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["dht", "--help"])
    out = capsys.readouterr().out
    for word in ("put", "get", "subscribe", "node", "keygen", "--bootstrap", "examples:"):
        assert word in out


@pytest.mark.parametrize("argv", [
    ["dht", "get", "--pubkey", "abcd", "--bootstrap", "127.0.0.1:1"],
    ["dht", "get", "--pubkey", "00" * 32, "--bootstrap", "nonsense"],
])
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_put_get_subscribe_through_a_node_process(tmp_path: Path) -> None:
    port = free_port()
    boot = "127.0.0.1:%d" % port
    node = subprocess.Popen([*CLI, "node", "--bind", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    sub: subprocess.Popen[str] | None = None
    try:
        assert node.stdout is not None
        assert _readline(node).startswith("dht node 127.0.0.1:%d" % port)
        key = tmp_path / "gw.key"
        kg = _run("keygen", "--key-file", str(key))
        assert kg.returncode == 0
        pub = kg.stdout.strip()
        assert len(pub) == 64
        common = ["--bootstrap", boot, "--bind", "127.0.0.1", "--timeout", "0.5"]
        put = _run("put", "--key-file", str(key), "--salt", "/site/temp", "21.5 C", *common)
        assert put.returncode == 0, put.stderr
        assert "seq 1 stored on 1 nodes" in put.stdout
        get = _run("get", "--pubkey", pub, "--salt", "/site/temp", *common)
        assert get.returncode == 0 and get.stdout.strip() == "seq 1: 21.5 C"
        # a subscriber hears the current value, then the next put pushed through the overlay
        sub = subprocess.Popen([*CLI, "subscribe", "--pubkey", pub, "--salt", "/site/temp",
                                "--count", "2", *common],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert sub.stdout is not None and sub.stderr is not None
        assert _readline(sub).strip() == "seq 1: 21.5 C"
        assert "joined topic" in _readline(sub, "stderr")
        put2 = _run("put", "--key-file", str(key), "--salt", "/site/temp", "22.0 C", *common)
        assert put2.returncode == 0 and "seq 2" in put2.stdout
        t0 = time.monotonic()
        assert _readline(sub).strip() == "seq 2: 22.0 C"
        assert sub.wait(timeout=10) == 0
        print("subscriber got the pushed value %.0f ms after put returned"
              % ((time.monotonic() - t0) * 1000))
    finally:
        for p in (sub, node):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        if node.stdout is not None:
            node.stdout.close()


def test_nothing_listening_is_said_so(tmp_path: Path) -> None:
    # a reserved port where no DHT node runs: every action says no node answered, at once
    key = tmp_path / "k"
    assert _run("keygen", "--key-file", str(key)).returncode == 0
    pub = "ab" * 32
    boot = ["--bootstrap", "127.0.0.1:%d" % free_port(), "--timeout", "0.3"]
    for args in (["get", "--pubkey", pub, "--salt", "t"],
                 ["put", "--key-file", str(key), "--salt", "t", "v"],
                 ["subscribe", "--pubkey", pub, "--salt", "t"]):
        r = _run(*args, *boot, timeout_s=30)
        assert r.returncode == 1, (args, r.returncode, r.stdout, r.stderr)
        assert "no DHT node answered" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert "no item found" not in r.stderr and "stored on 0" not in r.stdout
