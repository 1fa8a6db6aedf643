"""`pubmote firmware build`'s long steps: progress while they run (cmake's percentage and
the time), an interrupt that ends the step's whole process group and says so without a
traceback (exit 130), and an output folder that cannot be written refused before any
building (exit 2, nothing left behind)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pubmote.boards import fwbuild

STEP = """\
import os, sys, time
for pct in (5, 40, 75):
    print("[ %d%%] Building C object x.o" % pct, flush=True)
    time.sleep(0.4)
if len(sys.argv) > 1:  # a step that never ends, with a child of its own
    child = os.fork()
    if child == 0:
        time.sleep(600)
    open(sys.argv[1], "w").write(str(child))
    time.sleep(600)
"""


def test_a_long_step_reports_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fwbuild, "PROGRESS_S", 0.3)
    script = tmp_path / "step.py"
    script.write_text(STEP)
    lines: list[str] = []
    fwbuild._run([sys.executable, str(script)], tmp_path / "log", lines.append, "compiling")
    assert lines[0] == "compiling ..." and lines[-1].startswith("compiling done in")
    assert any("%, " in x and x.startswith("compiling ...") for x in lines[1:-1]), lines


def test_an_interrupt_ends_the_step_and_its_children(tmp_path: Path) -> None:
    # the CLI's _run, interrupted: a helper process runs it as the build would
    script = tmp_path / "step.py"
    script.write_text(STEP)
    pidfile = tmp_path / "child.pid"
    runner = tmp_path / "runner.py"
    runner.write_text(
        "import sys\nfrom pathlib import Path\nfrom pubmote.boards import fwbuild\n"
        "from pubmote.cli.main import EXIT_INTERRUPTED\n"
        "try:\n"
        "    fwbuild._run([sys.executable, %r, %r], Path(%r), print, 'building')\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(EXIT_INTERRUPTED)\n" % (str(script), str(pidfile), str(tmp_path / "log")))
    p = subprocess.Popen([sys.executable, str(runner)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and p.poll() is None, "the step never started"
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while _alive(grandchild):
        assert time.monotonic() < deadline, "the step's child outlived the interrupt"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:  # a zombie has ended
        return f.read().split(")")[-1].split()[0] != "Z"


def test_unwritable_out_is_refused_first(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for out in ("/proc/pubmote-x", str(a_file / "sub"), str(a_file)):
        r = subprocess.run([sys.executable, "-m", "pubmote", "firmware", "build", "--out", out],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--out %s" % out in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    deep = tmp_path / "a" / "b"
    with pytest.raises(fwbuild.OutputError):
        fwbuild._check_out(Path("/proc/pubmote-x/y"))
    fwbuild._check_out(deep)  # writable: fine, and nothing of it left behind
    assert not (tmp_path / "a").exists()
