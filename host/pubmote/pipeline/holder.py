"""Which JVM writes a --follow checkpoint. In local mode the driver's JVM is its child and
outlives a driver killed with kill -9 until it notices its closed stdin and has run its
shutdown hooks (seconds, minutes on a loaded gateway), still running the batch in hand. A
job restarted on the same checkpoint meanwhile would be a second writer of its logs, and
the two fail each other's batches. So a local job writes its JVM's PID into the
checkpoint (with the host's name: a checkpoint may sit on a folder other hosts share), and
a job starting there first waits for the JVM written there to end."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from .. import procs
from .errors import Log

HOLDER = "jvm.pid"
SAY_EVERY_S = 10.0


def _is_spark_jvm(pid: int) -> bool:
    return "org.apache.spark" in procs.cmdline(pid)


def own_jvm() -> int | None:
    """The PID of this process's Spark JVM (its child running SparkSubmit), if any."""
    return next((p for p in procs.children(os.getpid()) if _is_spark_jvm(p)), None)


def wait_for_previous(checkpoint: Path, log: Log) -> None:
    """Return once no JVM named in the checkpoint runs (saying so every 10 s while one
    does: Ctrl-C stops the wait)."""
    try:
        pid_s, host = (checkpoint / HOLDER).read_text().split()
        pid = int(pid_s)
    except (OSError, ValueError):
        return
    if host != socket.gethostname():  # a checkpoint on a shared folder, written elsewhere
        return
    said = 0.0
    while pid != own_jvm() and _is_spark_jvm(pid):
        if time.monotonic() - said >= SAY_EVERY_S:
            said = time.monotonic()
            log("waiting for the JVM of the job before on this checkpoint (pid %d) to end: "
                "it may still be writing a batch" % pid)
        time.sleep(0.2)


def hold(checkpoint: Path) -> None:
    """Name this process's JVM as the checkpoint's writer (nothing without one: a job on
    a Spark Connect server runs no JVM here)."""
    pid = own_jvm()
    if pid is None:
        return
    checkpoint.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint / (".%s.%d" % (HOLDER, os.getpid()))
    tmp.write_text("%d %s\n" % (pid, socket.gethostname()))
    os.replace(tmp, checkpoint / HOLDER)
