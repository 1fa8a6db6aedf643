"""A `pubmote pipeline` process under test (its output appended to a log file), the
streaming checkpoint's batch count, and the JVMs a process started: shared by the
local-mode, remote and cluster tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pubmote import procs
from pubmote.boards.cable import end_process

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


class PipelineJob:
    """One `pubmote pipeline ARGS` process (a Spark driver)."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log_path = log
        with log.open("ab") as f:
            self.p = subprocess.Popen([PUBMOTE, "pipeline", *args],
                                      env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
                                      stdout=f, stderr=subprocess.STDOUT)

    def wait_for(self, pred: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            assert self.p.poll() is None, "the driver died: %s" % self.tail()
            assert time.monotonic() < deadline, "timed out waiting for %s: %s" % (
                what, self.tail())
            time.sleep(0.05)

    def tail(self) -> str:
        """The log's last lines, without Java stack frames (a JVM stopping under load prints
        screens of them, which would hide the job's own lines)."""
        lines = [line for line in self.log_path.read_text(errors="replace").splitlines()
                 if not line.lstrip().startswith(("at ", "..."))]
        return "\n".join(lines[-40:])[-4000:]

    def kill9(self) -> None:
        os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait(timeout=30)

    def stop(self) -> None:
        end_process(self.p, grace_s=60)  # SIGTERM, SIGKILL a minute later


def jvms(pid: int) -> dict[int, str]:
    """pid's Java descendants: their command lines."""
    lines = {p: procs.cmdline(p) for p in procs.descendants(pid)}
    return {p: c for p, c in lines.items() if c.split(" ", 1)[0].endswith("java")}


def committed_batches(ckpt: Path, what: str) -> int:
    """Batches in the windows query's checkpoint log `what` ("offsets" or "commits")."""
    d = ckpt / "windows" / what
    return len([f for f in d.iterdir() if f.name.isdigit()]) if d.exists() else 0
