"""pubmote installed from a wheel, outside the checkout, as a pip user would: the wheel built
from a copy of the repository, installed with its `sim` extra into a fresh venv by that
venv's own pip (its dependencies from the package index, nothing borrowed from the
project's venv), run from a folder outside the checkout with a PATH that holds neither the
checkout nor the project's venv. `pubmote bridge --sim-boards 2` relays both simulated
boards' messages to `pubmote sub`, and deploy and the firmware build find their inputs in
the install; without the extra, the bridge names it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import free_port

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("pyproject.toml", "host", "shared", "firmware", "boards")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")


def _run(cmd: list[str], **kw: object) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, "%s failed:\n%s%s" % (cmd, p.stdout, p.stderr)
    return str(p.stdout)


def _wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=SKIP)
        else:
            shutil.copy2(ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"),
          str(src)])
    wheels = list((tmp / "dist").glob("pubmote-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _venv(tmp: Path, name: str, wheel: Path) -> Path:
    """A fresh venv (its own pip) with the wheel and its dependencies installed."""
    venv = tmp / name
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], env=_env(tmp))
    return py


def _env(tmp: Path, venv_bin: Path | None = None) -> dict[str, str]:
    """A user's environment: the system's PATH, not the project's venv nor the checkout."""
    project_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not p.startswith(str(ROOT)) and p != project_bin]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MICROPY"))}
    env["PATH"] = os.pathsep.join(([str(venv_bin)] if venv_bin else []) + path)
    env["PUBMOTE_BUILD_DIR"] = str(tmp / "cache")
    return env


@pytest.mark.timeout(600)
def test_wheel_outside_the_checkout_runs_simulated_boards(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    py = _venv(tmp_path, "venv", wheel)
    venv_bin = py.parent
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = _env(tmp_path)  # not even the venv's bin on PATH: its commands by their path
    # without the sim extra the bridge names it
    r = subprocess.run([str(venv_bin / "pubmote"), "bridge", "--sim-boards", "1",
                        "--no-view", "--sp-pub", "none", "--sp-sub", "none"],
                       cwd=away, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "pubmote[sim]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    _run([str(py), "-m", "pip", "install", "-q", "%s[sim]" % wheel], env=env)
    # nothing of the project's venv is visible: its packages are not importable
    leak = subprocess.run([str(py), "-c", "import pynng"], capture_output=True, cwd=away,
                          env=env)
    assert leak.returncode != 0, "the fresh venv sees the project's packages"
    where = _run([str(py), "-c", "\n".join([
        "import pubmote, pubmote_node, pubmote_wire",
        "from pubmote.boards import files, fwbuild, profiles",
        "print(pubmote.__file__)",
        "print(files.checkout())",
        "print(sorted(profiles.profile_names()))",
        "print(all(f.is_file() for _, f in fwbuild.frozen_files()))",
        "print(len(fwbuild.frozen_files()))",
        "print((files.firmware_dir() / 'main.py').is_file())",
        "print(pubmote_node.__file__)",
    ])], cwd=away, env=env).splitlines()
    assert where[0].startswith(str(tmp_path / "venv")), where
    assert where[1] == "None"  # not a checkout: nothing found through the repository
    assert where[2] == "['esp32', 'rp2040', 'unix']"
    assert where[3] == "True" and int(where[4]) > 10 and where[5] == "True"
    assert where[6].startswith(str(tmp_path / "venv")), where
    # the firmware build stages the manifest and its sources from the install
    staged = _run([str(py), "-c", "from pathlib import Path; from pubmote.boards import "
                   "fwbuild; print(fwbuild.stage_sources(Path('stage')))"], cwd=away, env=env)
    assert (away / staged.strip()).is_file()
    assert (away / "stage" / "shared" / "pubmote_wire" / "tlv.py").is_file()
    assert (away / "stage" / "firmware" / "frozen" / "main.py").is_file()

    url = "tcp://127.0.0.1:%d" % free_port()
    bridge = subprocess.Popen(
        [str(venv_bin / "pubmote"), "bridge", "--sim-boards", "2", "--no-view",
         "--sp-pub", url, "--sp-sub", "none", "--sim-period-ms", "200"],
        cwd=away, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        port = int(url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 60
        while True:  # the bridge listens once it has started
            assert bridge.poll() is None, bridge.communicate()[0].decode(errors="replace")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the bridge never listened on %s" % url
                time.sleep(0.1)
        # pubmote sub of the same install: both boards' readings, CBOR decoded
        sub = subprocess.run([str(venv_bin / "pubmote"), "sub", url, "/pubmote/demo/sim2/",
                              "--json", "--count", "1"], cwd=away, env=env,
                             capture_output=True, text=True, timeout=120)
        assert sub.returncode == 0, sub.stderr
        rec = json.loads(sub.stdout)
        assert rec["topic"] == "/pubmote/demo/sim2/temperature"
        assert set(rec["payload"]) == {"seq", "t_ms", "taken_ms", "celsius"}
        sub = subprocess.run([str(venv_bin / "pubmote"), "sub", url, "/pubmote/demo/sim1/",
                              "--count", "1"], cwd=away, env=env,
                             capture_output=True, text=True, timeout=120)
        assert sub.returncode == 0 and "celsius" in sub.stdout, sub.stderr
    finally:
        bridge.send_signal(signal.SIGINT)
        try:
            out = bridge.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            bridge.kill()
            out = bridge.communicate()[0]
    assert b"Traceback" not in out, out.decode(errors="replace")

