"""A --follow job started on a checkpoint whose last writer's JVM still runs (its driver
killed with kill -9) waits for that JVM before it starts its queries; a PID left by a JVM
long gone, or reused by another program, holds nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pubmote.pipeline import holder


def wait_until(pred: Callable[[], object], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def orphan_jvm() -> int:
    """A process whose command line is a Spark JVM's, as far as /proc tells, orphaned as a
    killed driver's JVM is (its parent gone)."""
    fake = [sys.executable, "-c", "import signal; signal.pause()",  # until killed
            "org.apache.spark.deploy.SparkSubmit"]
    spawn = ("import subprocess, sys; print(subprocess.Popen(sys.argv[1:], stdout=subprocess"
             ".DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True).pid)")
    parent = subprocess.run([sys.executable, "-c", spawn, *fake],
                            capture_output=True, text=True, timeout=60, check=True)
    return int(parent.stdout)


def test_a_job_waits_for_the_jvm_written_in_its_checkpoint(tmp_path: Path) -> None:
    jvm = orphan_jvm()
    try:
        (tmp_path / holder.HOLDER).write_text("%d %s\n" % (jvm, socket.gethostname()))
        said: list[str] = []
        waiter = threading.Thread(target=holder.wait_for_previous, args=(tmp_path, said.append))
        waiter.start()
        wait_until(lambda: said)
        assert "(pid %d)" % jvm in said[0]
        assert waiter.is_alive()
    finally:
        os.kill(jvm, signal.SIGKILL)
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert len(said) == 1  # said once, not on every poll


def test_a_pid_of_no_spark_jvm_holds_nothing(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    said: list[str] = []
    jvm = orphan_jvm()
    host = socket.gethostname()
    try:
        # a JVM that has ended, a PID of another program (init), one of another host, a
        # damaged file
        for content in ("%d %s" % (gone.pid, host), "1 %s" % host, "%d elsewhere" % jvm,
                        "%d" % jvm, "not a pid"):
            (tmp_path / holder.HOLDER).write_text(content + "\n")
            holder.wait_for_previous(tmp_path, said.append)
    finally:
        os.kill(jvm, signal.SIGKILL)
    holder.wait_for_previous(tmp_path / "none", said.append)  # a new checkpoint
    assert said == []


def test_a_job_names_its_own_jvm_only(tmp_path: Path) -> None:
    holder.hold(tmp_path)  # this process runs no JVM: nothing written
    assert not (tmp_path / holder.HOLDER).exists()
