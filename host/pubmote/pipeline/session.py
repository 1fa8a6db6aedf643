"""Starting Spark for the pipeline (on the Java that java.py finds): a SparkSession with
sane settings for one gateway (local[*]) that any --master and --conf override, quiet
logs, Spark's class archive (jvm_archive.py), and the executors running no Python: the
journal's columns are typed and decoded before Spark reads them (columns.py), so no
Python UDF runs on an executor."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import procs
from .errors import PipelineError
from .java import require_java

__all__ = ["LOCAL_DRIVER_MEMORY", "parse_conf", "spark_session"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
"""


LOCAL_DRIVER_MEMORY = "480m"


def spark_session(master: str = "local[*]", conf: Mapping[str, str] | None = None, *,
                  app_name: str = "pubmote-pipeline", verbose: bool = False,
                  save_classes: bool = False, short: bool = False,
                  resident: bool = False) -> SparkSession:
    """A SparkSession for the pipeline. Defaults (each overridden by `conf`): UTC session
    time zone (windows in UTC whatever the gateway's zone), no web UI, and for local
    masters a few shuffle partitions and the loopback address instead of Spark's 200
    partitions and its guess of a LAN address. The driver's JVM maps the class archive
    (jvm_archive.py) when there is one; with `save_classes` and none yet, it writes one as
    it exits (jvm_archive.finish() after spark.stop()). `short` (a local batch run over a
    small journal: backlog.short_run) keeps the JVM to its first JIT compiler, whose
    quick code a short run ends with before the optimising one's would pay back.
    `resident` (a --follow job, a Connect server) commits a local JVM's whole heap as it
    starts, so what the job holds stays flat while it runs for days."""
    from . import jvm_archive

    java = require_java()
    from pyspark.sql import SparkSession

    # a Spark of our own, whatever the environment says: pyspark would make a Spark
    # Connect client of this builder under SPARK_REMOTE, or SPARK_CONNECT_MODE_ENABLED,
    # which a remote session sets in its process and so in every process it starts
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        os.environ.pop(var, None)
    local = master.startswith("local")
    conf = dict(conf or {})
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        # the batch run names each journal file's columns (100 at 10M bench rows): listing
        # them in the driver is cheaper than the Spark job Spark runs beyond 32 paths
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "4096",
        # the windows table's latency lists (collect_list) are an object aggregate, which
        # Spark moves from a hash map to sorting its input beyond 128 groups in a task: a
        # task of 100,000 journal rows holds some 600 windows. Hashing up to 4096 (each
        # group holds its own latencies: the task's rows at most) took that table from 16-40 s
        # to 8-20 s of wall time at 10M rows in paired runs, same CPU (PROFILE.md).
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "4096",
        # small scan tasks: Spark packs files into tasks of up to 128 MB, counting 4 MB per
        # file, so the bench's 100 journal files (0.5 MB of columns each) made 4 tasks of
        # 3M rows: too many windows per task to stay hashed, and a straggler on 2 cores.
        # At 8 MB a task reads about one journal file: at 10M rows the windows table took
        # 21.5 CPU s instead of 25.4, 11.6 s wall instead of 18.4, and the JVM's peak RSS
        # 614 MB instead of 791 (bench/pipeline/PROFILE.md); no change at 1M.
        "spark.sql.files.maxPartitionBytes": "8m",
        # Spark keeps what it ran for its UI's pages in the driver's heap (UI or not): by
        # default the last 1,000 SQL executions, jobs and stages, 100,000 tasks a stage. A
        # --follow job runs two executions every trigger, so its heap filled with them for
        # hours; the last few are what a status line or a debugging user needs
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "50",
        "spark.ui.retainedStages": "50",
        "spark.ui.retainedTasks": "1000",
        "spark.ui.retainedDeadExecutors": "10",
        "spark.sql.streaming.ui.retainedQueries": "20",
        "spark.sql.streaming.ui.retainedProgressUpdates": "20",
    }
    java_opts = ""
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update({"spark.driver.host": "127.0.0.1",
                         "spark.driver.bindAddress": "127.0.0.1",
                         "spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)),
                         # local mode runs the executors in the driver's JVM: its heap is
                         # the job's. Aggregations spill to disk beyond their share, so a
                         # small heap bounds the memory at no measurable cost in time. Spark
                         # wants 450 MB of usable heap (the serial collector's: the heap
                         # less a survivor space, 464 MB at 480m); 480m instead of 512m
                         # took 70 MB off the JVM's peak RSS at 10M rows, same CPU
                         # (bench/pipeline/PROFILE.md).
                         "spark.driver.memory": LOCAL_DRIVER_MEMORY})
        # one collector thread: on a gateway's few cores the parallel ones only contend
        java_opts = "-XX:+UseSerialGC " + ("-XX:TieredStopAtLevel=1 " if short else "")
        if resident:
            # The heap's pages become resident as the collector first uses them, so a
            # long job's memory grew for minutes (+64 MB over the second half of a
            # 300 s run at 5,000 messages/s) until the heap reached its bound, and a
            # leak would look the same. Taken whole at the start (as database servers
            # on the JVM do), growth after it is the job's own.
            heap = conf.get("spark.driver.memory", LOCAL_DRIVER_MEMORY)
            java_opts += "-Xms%s -XX:+AlwaysPreTouch " % heap
    if "spark.driver.extraJavaOptions" not in conf:
        level = "info" if verbose else "error"
        # one small file per level, rewritten by each run (the JVM reads it by path)
        props = Path(tempfile.gettempdir()) / ("pubmote-spark-log4j2-%s.properties" % level)
        tmp = props.with_name("%s.%d" % (props.name, os.getpid()))
        tmp.write_text(LOG4J2.format(level=level))
        os.replace(tmp, props)  # atomic: a job starting beside us never reads half a file
        settings["spark.driver.extraJavaOptions"] = " ".join(filter(None, (
            java_opts + "-Dlog4j2.configurationFile=file:%s" % props,
            jvm_archive.java_options(java, save=save_classes))))
    settings.update(conf)
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except BaseException:
        # a JVM half started (Ctrl-C, an error) is ours to end: pyspark starts it ignoring
        # SIGINT, and it would run on until it noticed our closed stdin and had run its
        # shutdown hooks (over 20 s on a loaded gateway); at start-up it holds nothing
        for pid in procs.descendants(os.getpid()):
            # the launch chain only: spark-submit's script, its launcher, the JVM
            if any(w in procs.cmdline(pid) for w in ("spark-submit", "spark-class",
                                                     "org.apache.spark")):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        raise
    spark.sparkContext.setLogLevel("INFO" if verbose else "ERROR")
    return spark


def parse_conf(items: list[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` items as a dict; PipelineError on an item without '='."""
    conf: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise PipelineError("--conf wants KEY=VALUE, not %r" % item)
        conf[k] = v
    return conf
