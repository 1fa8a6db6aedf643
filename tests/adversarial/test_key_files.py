"""Key files (the boards' keys, the DHT key, the mesh identity): every loader refuses a
file that group or others may read or write, naming the file and the `chmod 600` to run;
every key pubmote makes is 0600 from its first byte; a key file named in a folder that
does not exist is an error, not a new identity; and a deploy that fails leaves the
gateway's keys file as it was."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pubmote.core.auth import board_key, key_for_board, load_keys, save_board_key
from pubmote.dht.bep44 import KeyPair as DhtKeyPair
from pubmote.files.private import KeyFileError
from pubmote.p2p.identity import load_or_create_key

PUBMOTE = [sys.executable, "-m", "pubmote"]
# every permission bit a key file must not have, alone and in the usual combinations
LOOSE_MODES = [0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o644, 0o660, 0o666, 0o755, 0o777]


def _board_keys(path: Path) -> None:
    key_for_board(path, "b1")


def _dht_key(path: Path) -> None:
    DhtKeyPair.load(path, create=True)


def _mesh_key(path: Path) -> None:
    load_or_create_key(path)


LOADERS: dict[str, tuple[Callable[[Path], None], Callable[[Path], Any]]] = {
    # name: (make a good key file at path, load it)
    "board keys": (_board_keys, load_keys),
    "dht key": (_dht_key, DhtKeyPair.load),
    "dht key (create)": (_dht_key, lambda p: DhtKeyPair.load(p, create=True)),
    "mesh key": (_mesh_key, lambda p: load_or_create_key(p, create=False)),
    "mesh key (create)": (_mesh_key, load_or_create_key),
    "board key for deploy": (_board_keys, lambda p: board_key(p, "b1")),
}


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_made_private_and_loose_ones_refused(tmp_path: Path, kind: str) -> None:
    make, load = LOADERS[kind]
    path = tmp_path / "k"
    make(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    load(path)  # the file as made loads
    assert [p.name for p in tmp_path.iterdir()] == ["k"]  # no temporary left behind
    for mode in LOOSE_MODES:
        path.chmod(mode)
        with pytest.raises(KeyFileError) as e:
            load(path)
        assert str(path) in str(e.value) and "chmod 600 %s" % path in str(e.value), mode
    path.chmod(0o600)
    load(path)


def test_board_keys_file_checked_as_it_loads(tmp_path: Path) -> None:
    bad = {"not json": b"{", "binary": b"\xff\xfe\x00", "a list": b"[]",
           "boards not a table": b'{"boards": []}', "short key": b'{"boards": {"b": "00"}}',
           "not hex": b'{"boards": {"b": "zz"}}', "a number": b'{"boards": {"b": 7}}'}
    for what, data in bad.items():
        p = tmp_path / "keys.json"
        p.write_bytes(data)
        p.chmod(0o600)
        with pytest.raises(ValueError) as e:
            load_keys(p)
        assert str(p) in str(e.value), what


def test_save_board_key_adds_and_keeps(tmp_path: Path) -> None:
    p = tmp_path / "keys.json"
    k1 = board_key(p, "b1")
    assert not p.exists()  # asking writes nothing
    save_board_key(p, "b1", k1)
    save_board_key(p, "b2", b"\x02" * 32)
    assert load_keys(p) == {"b1": k1, "b2": b"\x02" * 32}
    assert board_key(p, "b1") == k1
    assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_key_file_in_a_missing_folder_is_no_new_identity(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "mesh.key"
    with pytest.raises(KeyFileError):
        load_or_create_key(missing)
    assert not (tmp_path / "typo").exists()
    # the default location's folder is made
    load_or_create_key(missing, make_dirs=True)
    assert missing.exists()


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(PUBMOTE + list(args), capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, XDG_CONFIG_HOME="/nonexistent"))


def test_commands_refuse_loose_key_files(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    key_for_board(keys, "sim1")
    dht = tmp_path / "gw.key"
    _dht_key(dht)
    mesh = tmp_path / "mesh.key"
    _mesh_key(mesh)
    for f in (keys, dht, mesh):
        f.chmod(0o644)
    runs = {
        "bridge --keys": _run("bridge", "--keys", str(keys), "--tcp", "127.0.0.1:0",
                              "--sp-pub", "none", "--sp-sub", "none", "--no-view"),
        "bridge --dht-key-file": _run("bridge", "--config", str(_toml(tmp_path, dht)),
                                      "--no-view"),
        "bridge --mesh-key-file": _run("bridge", "--tcp", "127.0.0.1:0", "--sp-pub", "none",
                                       "--sp-sub", "none", "--no-view", "--mesh-key-file",
                                       str(mesh), "--mesh-listen", "/ip4/127.0.0.1/tcp/0"),
        "dht put --key-file": _run("dht", "put", "--key-file", str(dht), "--salt", "t", "v",
                                   "--bootstrap", "127.0.0.1:9"),
        "mesh id": _run("mesh", "id", "--key-file", str(mesh)),
    }
    for what, r in runs.items():
        assert r.returncode in (1, 2), (what, r.returncode, r.stdout, r.stderr)
        assert "chmod 600" in r.stderr and "Traceback" not in r.stderr, (what, r.stderr)


def _toml(tmp: Path, dht_key: Path) -> Path:
    cfg = tmp / "gw.toml"
    cfg.write_text('tcp = "127.0.0.1:0"\nsp_pub = "none"\nsp_sub = "none"\n'
                   'retained = ["/t"]\ndht_host = "127.0.0.1"\ndht_key_file = %s\n'
                   % json.dumps(str(dht_key)))
    return cfg


def test_failed_deploy_writes_no_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    r = _run("deploy", "--board", "unix", "--port", str(tmp_path / "no-such-repl"),
             "--name", "b9", "--key-file", str(keys), "--timeout", "5")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert not keys.exists()
    key_for_board(keys, "b1")
    before = keys.read_bytes()
    r = _run("deploy", "--board", "unix", "--port", str(tmp_path / "no-such-repl"),
             "--name", "b9", "--key-file", str(keys), "--timeout", "5")
    assert r.returncode != 0 and keys.read_bytes() == before
