"""Every mistake a new user makes with `pubmote` gets one line on stderr naming the flag or
key, what was wrong and what to do, with exit status 2 and no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def _run(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PUBMOTE, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def _one_line(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = p.stderr
    assert p.returncode == 2, (p.returncode, err, p.stdout)
    assert "Traceback" not in err + p.stdout, err
    assert err.endswith("\n") and err.count("\n") == 1, err  # exactly one line
    for n in needles:
        assert n in err, (n, err)
    return err


def _bridge(*args: str, sp: bool = True) -> list[str]:
    # were a mistake not caught, the bridge would start: never on the default SP ports,
    # which `make run` or a parallel test may hold (`none` entries are dropped, so a
    # following --sp-pub URL is still checked)
    return ["bridge", "--no-view", *(["--sp-pub", "none", "--sp-sub", "none"] if sp else []),
            *args]


PORT_CASES = [
    (["--tcp", "127.0.0.1:70000"], "--tcp 127.0.0.1:70000"),
    (["--udp", "0.0.0.0:65536"], "--udp 0.0.0.0:65536"),
    (["--sp-pub", "tcp://127.0.0.1:70000"], "--sp-pub tcp://127.0.0.1:70000"),
    (["--sp-sub", "tcp://127.0.0.1:99999"], "--sp-sub tcp://127.0.0.1:99999"),
    (["--ndn-face", "tcp://127.0.0.1:70000"], "--ndn-face tcp://127.0.0.1:70000"),
]


@pytest.mark.parametrize(("args", "flag"), PORT_CASES)
def test_port_above_65535(tmp_path: Path, args: list[str], flag: str) -> None:
    _one_line(_run(_bridge("--sim-boards", "1", *args), tmp_path), flag, "above 65535",
              "1 to 65535")


def test_dht_node_port_above_65535(tmp_path: Path) -> None:
    _one_line(_run(["dht", "node", "--port", "70000"], tmp_path), "--port", "70000",
              "0 to 65535")


@pytest.mark.parametrize(("toml", "needles"), [
    ("sp_pub = 26001\n", ("TOML key sp_pub", "26001", "--sp-pub")),
    ("serial = 5\n", ("TOML key serial", "expected text")),
    ('sim_boards = "two"\n', ("TOML key sim_boards", "whole number", "'two'")),
    ('sim_boards = 1\njournal_max_age_s = "x"\n', ("(--journal-max-age)", "journal_max_age")),
    ('sim_boards = 1\ntimeout_ms = "soon"\n', ("TOML key timeout_ms", "whole number")),
    ('sim_boards = 1\nsim_kind = "esp32"\n', ("TOML key sim_kind", "unix, pico", "'esp32'")),
    ("sim_boards = 1 x\n", ("--config", "not valid TOML", "line 1")),
    ('sim_boards = 1\ngatway = "typo"\n', ("unknown key gatway", "did you mean gateway?")),
    ("sim_boards = 1\njournal_backlog_records = 0\n",
     ("TOML key journal_backlog_records", "at least 1", "0")),
    ('sim_boards = 1\njournal_backlog_bytes = "16M"\n',
     ("TOML key journal_backlog_bytes", "whole number")),
])
def test_wrong_toml(tmp_path: Path, toml: str, needles: tuple[str, ...]) -> None:
    conf = tmp_path / "gw.toml"
    conf.write_text(toml)
    _one_line(_run(_bridge("--config", str(conf), sp=False), tmp_path, timeout=20), *needles)


def test_sim_app_config_not_json(tmp_path: Path) -> None:
    _one_line(_run(_bridge("--sim-boards", "1", "--sim-app-config", "{bad"), tmp_path),
              "--sim-app-config {bad", "not JSON", "period_ms")
    _one_line(_run(_bridge("--sim-boards", "1", "--sim-app-config", "[1]"), tmp_path),
              "--sim-app-config", "JSON object")
    _one_line(_run(["sim", "--dir", str(tmp_path), "--app-config", "{bad"], tmp_path),
              "--app-config {bad", "not JSON")


def test_serial_ports_that_are_not_serial_ports(tmp_path: Path) -> None:
    regular = tmp_path / "notes.txt"
    regular.write_text("x")
    _one_line(_run(_bridge("--serial", str(regular)), tmp_path), "--serial %s" % regular,
              "not a serial port", "regular file", "/dev/ttyUSB")
    _one_line(_run(_bridge("--serial", "/dev/null"), tmp_path), "--serial /dev/null",
              "not a serial port")
    _one_line(_run(_bridge("--serial", str(tmp_path)), tmp_path), "directory")
    # the bad baud rate no longer becomes part of the port's name
    _one_line(_run(_bridge("--serial", "/dev/null:abc"), tmp_path), "baud rate 'abc'",
              "/dev/null:115200")
    _one_line(_run(_bridge("--serial", "/dev/ttyNOPE7:fast"), tmp_path), "baud rate 'fast'")
    _one_line(_run(_bridge("--serial", "/dev/ttyNOPE7:9"), tmp_path), "baud rate 9")


def test_mesh_peer_that_is_no_peer(tmp_path: Path) -> None:
    err = _one_line(_run(_bridge("--mesh-peer",
                                 "/ip4/127.0.0.1/tcp/26050/p2p/notapeer"), tmp_path),
                    "--mesh-peer /ip4/127.0.0.1/tcp/26050/p2p/notapeer", "notapeer is not a "
                    "PeerId", "pubmote mesh id")
    assert "not a PeerId (not a PeerId" not in err
    _one_line(_run(_bridge("--mesh-listen", "/ip4/127.0.0.1/tcpx/1"), tmp_path),
              "--mesh-listen", "not a multiaddr")
    listen = ("--mesh-listen", "/ip4/127.0.0.1/tcp/0")
    _one_line(_run(_bridge(*listen, "--realm", "a/b"), tmp_path), "--realm", "'a/b'")
    _one_line(_run(_bridge(*listen, "--realm-member", "nonsense"), tmp_path),
              "--realm-member", "neither a PeerId nor a key file")
    _one_line(_run(_bridge(*listen, "--mesh-topic", "a/b"), tmp_path), "--mesh-topic")
    _one_line(_run(_bridge(*listen, "--name", "*"), tmp_path), "--name", "addresses")


def test_keys_file_with_a_key_that_is_not_hex(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"boards": {"board1": "zz" * 32}}))
    keys.chmod(0o600)
    _one_line(_run(_bridge("--sim-boards", "1", "--keys", str(keys)), tmp_path),
              "--keys %s" % keys, "board board1", "not hex")
    keys.write_text("{")
    _one_line(_run(_bridge("--sim-boards", "1", "--keys", str(keys)), tmp_path), "not JSON")
    _one_line(_run(_bridge("--sim-boards", "1", "--keys", str(tmp_path / "nope.json")),
                   tmp_path), "nope.json", "no such file")


def test_pipeline_window_and_journal_folder(tmp_path: Path) -> None:
    t0 = time.monotonic()
    _one_line(_run(["pipeline", str(tmp_path), "--window", "banana"], tmp_path),
              "--window banana", "not a duration", "1 minute")
    _one_line(_run(["pipeline", str(tmp_path), "--watermark", "soon"], tmp_path),
              "--watermark soon")
    f = tmp_path / "journal.jsonl"
    f.write_text("{}\n")
    _one_line(_run(["pipeline", str(f)], tmp_path), "a file, not a folder")
    _one_line(_run(["pipeline", str(tmp_path / "nothere")], tmp_path), "no such folder")
    # the journal's typed columns are written beside it: a folder of this host
    _one_line(_run(["pipeline", "hdfs:///pubmote/journal"], tmp_path), "typed columns")
    assert time.monotonic() - t0 < 30  # found before Spark starts


def test_flash_ports(tmp_path: Path) -> None:
    fw = tmp_path / "fw.bin"
    fw.write_bytes(b"\xe9" + bytes(4095))
    err = _one_line(_run(["flash", "--board", "esp32", "--port", "/dev/null", "--firmware",
                          str(fw)], tmp_path), "--port /dev/null", "not a serial port")
    assert not err.rstrip().endswith(":")  # never an empty reason
    uf2 = tmp_path / "fw.uf2"
    uf2.write_bytes(bytes(512))
    t0 = time.monotonic()
    p = subprocess.run([PUBMOTE, "flash", "--board", "rp2040", "--port", "/dev/bogus",
                        "--firmware", str(uf2)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PUBMOTE_UF2_DRIVE=str(tmp_path / "nodrive")))
    _one_line(p, "--port /dev/bogus", "no such port")
    assert time.monotonic() - t0 < 10  # said at once, not after waiting for a drive


def test_deploy_wifi_link_needs_host_and_network(tmp_path: Path) -> None:
    # refused before anything waits for the port (which does not exist here)
    _one_line(_run(["deploy", "--board", "esp32", "--port", "/dev/ttyNOPE7", "--link", "tcp"],
                   tmp_path), "host=GATEWAY_IP", "--tcp 0.0.0.0:6365")
    _one_line(_run(["deploy", "--board", "esp32", "--port", "/dev/ttyNOPE7", "--link", "udp",
                    "--set", "host=192.168.1.5"], tmp_path), "ssid=NETWORK", "password=")
    _one_line(_run(["deploy", "--board", "rp2040", "--port", "/dev/ttyNOPE7", "--link", "tcp",
                    "--set", "host=192.168.1.5", "--set", "ssid=home", "--set",
                    "password=short"], tmp_path), "8 to 63")
    _one_line(_run(["deploy", "--board", "esp32", "--port", "/dev/ttyNOPE7", "--link", "tcp",
                    "--set", "host=192.168.1.5", "--set", "port=70000", "--set", "ssid=home"],
                   tmp_path), "port=70000", "1 to 65535")
    _one_line(_run(["deploy", "--board", "esp32", "--port", "/dev/ttyNOPE7", "--link", "wifi"],
                   tmp_path), "--link", "'wifi'", "tcp")


def test_deploy_wifi_config_accepted() -> None:
    from pubmote.boards.profiles import board_config, check_config, load_profile

    esp = load_profile("esp32")
    cfg = board_config(esp, "esp1", "tcp", host="192.168.1.5", ssid="home",
                       password="secret-pw")
    check_config(esp, cfg)
    assert cfg == {"name": "esp1", "link": "tcp", "port": 6365, "host": "192.168.1.5",
                   "ssid": "home", "password": "secret-pw"}
    check_config(esp, board_config(esp, "esp1", "udp", host="gw.local", ssid="open-net"))
    unix = load_profile("unix")  # the simulated board uses the host's network: no ssid
    check_config(unix, board_config(unix, "sim", "tcp", host="127.0.0.1"))


def test_argparse_mistakes_are_one_line_too(tmp_path: Path) -> None:
    _one_line(_run(_bridge("--sim-boards", "banana"), tmp_path), "--sim-boards",
              "banana", "pubmote bridge --help")
    _one_line(_run(_bridge("--no-such-flag"), tmp_path), "--no-such-flag")
    _one_line(_run(_bridge("--status-every", "0", "--sim-boards", "1"), tmp_path, timeout=20),
              "--status-every 0")


def test_pipeline_follow_may_start_before_the_bridge(tmp_path: Path) -> None:
    # `make run PIPELINE=1` starts `pipeline --follow` before the bridge makes the folder
    import argparse

    from pubmote.cli.pipeline import usage_error

    ns = argparse.Namespace(window="1 minute", watermark="10 seconds", follow=True,
                            report=None, journal=str(tmp_path / "later"), trigger_seconds=5.0,
                            remote=None, master="local[*]", conf=[])
    assert usage_error(ns) is None
    ns.follow = False
    assert "no such folder" in (usage_error(ns) or "")
