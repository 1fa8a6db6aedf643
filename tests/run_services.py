"""Services shared by every worker of one pytest run (a JVM costs 25-30 CPU seconds to
start and some 800 MB to keep: one for the run, not one per xdist worker). The first
worker that needs a service starts it under a file lock in the run's folder; the others
find its address there. The run's controller (the one process that outlives every
worker) made the folder and ends each service it lists, by PID, when the run ends."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pubmote import procs

RUN_DIR_ENV = "PUBMOTE_TEST_RUN_DIR"


def make_run_dir() -> Path:
    """The controller's: a folder for this run, named in the environment its workers
    inherit."""
    d = Path(tempfile.mkdtemp(prefix="pubmote-test-run-"))
    os.environ[RUN_DIR_ENV] = str(d)
    return d


def run_dir() -> Path:
    d = os.environ.get(RUN_DIR_ENV)
    assert d, "no %s: the run's controller (tests/conftest.py) sets it" % RUN_DIR_ENV
    return Path(d)


def _started_at(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused PID apart); None
    when it is gone or a zombie."""
    try:
        fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


def shared(name: str, start: Callable[[Callable[[int], None]], str]) -> str:
    """The address of the run's service `name`; the first caller starts it: `start(listed)`
    starts its process, calls listed(PID) at once (the controller ends what is listed),
    and returns its address once it serves."""
    d = run_dir()
    with (d / (name + ".lock")).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait while the first one starts it
        address = d / (name + ".address")
        if address.exists():
            return address.read_text()
        failed = d / (name + ".failed")
        assert not failed.exists(), "the run's %s did not start: %s" % (
            name, failed.read_text())

        def listed(pid: int) -> None:
            with (d / "pids").open("a") as f:
                f.write("%d %s\n" % (pid, _started_at(pid)))

        try:
            url = start(listed)
        except BaseException as e:
            failed.write_text(str(e)[-3000:])
            raise
        address.write_text(url)
        return url


def end_all(d: Path, grace_s: float = 60) -> None:
    """The controller's, as the run ends: SIGTERM to each listed service still running (the
    same process: PID and start time), SIGKILL to it and its children after grace_s."""
    try:
        lines = (d / "pids").read_text().split("\n")
    except OSError:
        return
    mine = []
    for line in lines:
        if line.strip():
            pid, started = int(line.split()[0]), line.split()[1]
            if _started_at(pid) == started:
                mine.append((pid, started))
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid, started in mine:
        while _started_at(pid) == started and time.monotonic() < deadline:
            time.sleep(0.1)
        if _started_at(pid) == started:
            for p in [pid, *procs.descendants(pid)]:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
