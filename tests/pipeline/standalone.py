"""A real Spark standalone cluster on loopback for the cluster tests: one master and N
workers started with the installed pyspark's own `spark-class` (no other download), each a
JVM this module started and stops by PID. Readiness is read from the master's log."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pyspark

from e2e import free_port
from pubmote import procs

SPARK_HOME = Path(pyspark.__file__).parent
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
# JVMs for a test: one collector thread, the C1 compiler only (a third less JVM time on
# short runs), small heaps; Spark's floor for a heap that runs tasks is 450 MB.
TEST_JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
EXECUTOR_MEMORY = "512m"


class Daemon:
    """One master or worker JVM, its log in a file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with log.open("ab") as f:
            # spark-class execs java at its end: this PID is the daemon's JVM
            self.p = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *argv],
                                      env=env, stdout=f, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        """The node is lost: the worker JVM and the executors it launched, at once."""
        for pid in [self.p.pid, *procs.children(self.p.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.p.wait(timeout=30)

    def stop(self) -> None:
        if self.p.poll() is not None:
            return
        executors = procs.children(self.p.pid)  # a worker stops its executors; make sure
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        for pid in executors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Cluster:
    """A standalone master and `workers` workers (1 core, 1 GB each) under `root`."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = "spark://127.0.0.1:%d" % self.port
        self.env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=str(root / "logs"), SPARK_PID_DIR=str(root),
                        SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=TEST_JVM_OPTS,
                        SPARK_LOCAL_DIRS=str(root / "local"))
        self.master = Daemon("master", [MASTER, "--host", "127.0.0.1", "--port",
                                        str(self.port), "--webui-port", str(free_port())],
                             self.env, root / "master.log")
        self.workers: list[Daemon] = []
        for i in range(workers):
            self.workers.append(self.start_worker(i))

    def start_worker(self, i: int) -> Daemon:
        work = self.root / ("worker%d" % i)
        work.mkdir(exist_ok=True)
        return Daemon("worker%d" % i,
                      [WORKER, self.url, "--host", "127.0.0.1", "--webui-port",
                       str(free_port()), "--cores", "1", "--memory", "1g",
                       "--work-dir", str(work)],
                      self.env, self.root / ("worker%d.log" % i))

    def wait_ready(self, timeout_s: float = 180) -> None:
        """Until the master has registered every worker (it logs each)."""
        deadline = time.monotonic() + timeout_s
        while self.master.text().count("Registering worker") < len(self.workers):
            for d in [self.master, *self.workers]:
                assert d.p.poll() is None, "%s died: %s" % (d.name, d.text()[-3000:])
            assert time.monotonic() < deadline, "cluster not up: %s" % self.master.text()[-3000:]
            time.sleep(0.1)

    def apps_run_by(self, i: int) -> list[str]:
        """The applications worker i launched an executor for (its work dir has one
        folder per application)."""
        work = self.root / ("worker%d" % i)
        return sorted(d.name for d in work.iterdir() if d.name.startswith("app-"))

    def conf(self) -> list[str]:
        """`pubmote pipeline` arguments that run a job on this cluster from this host."""
        return ["--master", self.url, "--conf", "spark.driver.host=127.0.0.1",
                "--conf", "spark.executor.memory=" + EXECUTOR_MEMORY,
                "--conf", "spark.executor.extraJavaOptions=" + TEST_JVM_OPTS,
                "--conf", "spark.driver.extraJavaOptions=" + TEST_JVM_OPTS,
                "--conf", "spark.sql.shuffle.partitions=2",
                # every executor is on this host: waiting up to 3 s per task for the
                # "right" one (the one holding a partition's stream state) only slows
                # the test down
                "--conf", "spark.locality.wait=0"]

    def stop(self) -> None:
        for d in [*self.workers, self.master]:
            d.stop()
