"""A `pubmote pipeline serve` process for the tests: a resident Spark Connect server that
several tests' jobs share (one JVM instead of one per job), started and stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from e2e import free_port
from pubmote import procs
from pubmote.boards.cable import end_process

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
READY_S = 300.0  # a JVM's start on 2 busy cores


class ConnectServer:
    """`pubmote pipeline serve --port P ARGS`, its output in `log`."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port()
        self.url = "sc://127.0.0.1:%d" % self.port
        self.log = log
        with log.open("ab") as f:
            self.p = subprocess.Popen(
                [PUBMOTE, "pipeline", "serve", "--port", str(self.port), *args],
                env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
                stdout=f, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> str:
        """Until it says it listens; its URL."""
        deadline = time.monotonic() + READY_S
        while "listening on " + self.url not in self.text():
            assert self.p.poll() is None, "the server died: %s" % self.text()[-3000:]
            assert time.monotonic() < deadline, "no server: %s" % self.text()[-3000:]
            time.sleep(0.05)
        return self.url

    def kill9(self) -> None:
        """The driver is lost: the server's process and its JVM, at once."""
        for pid in [self.p.pid, *procs.children(self.p.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.p.wait(timeout=30)

    def stop(self) -> int | None:
        """SIGTERM (a service stopped), else SIGKILL after a minute; its exit status."""
        end_process(self.p, grace_s=60)  # SIGTERM, SIGKILL a minute later
        return self.p.returncode
