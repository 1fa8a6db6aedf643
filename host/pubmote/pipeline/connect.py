"""Spark Connect for the pipeline: `pubmote pipeline serve` (a resident Spark, started once,
with the pipeline's JVM settings and class archive) and the thin client `--remote
sc://HOST:PORT` uses (no JVM of its own: the jobs' plans go to the server over gRPC).

The server is the pipeline's own SparkSession (session.py) with Spark's Connect plugin,
which starts the gRPC service inside the driver: no spark-submit, no second JVM, and the
same local[*] defaults, --master and --conf as a batch run. The server reads the journal's
columns and writes the tables on its own machine's file system: the client sends absolute
paths (remote_paths)."""

from __future__ import annotations

import ipaddress
import signal
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .errors import Log, PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_PORT", "is_loopback", "remote_session", "serve", "server_conf"]

DEFAULT_PORT = 15002  # Spark Connect's own default
PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
REACH_TIMEOUT_S = 5.0
# the client's retries of a failed call: 50 ms, x4 each time, at most 5 s apart (~15 s)
RETRIES = 6
MAX_BACKOFF_MS = 5000


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_conf(host: str, port: int) -> dict[str, str]:
    """The settings that make the pipeline's session a Connect server on host:port."""
    return {"spark.plugins": PLUGIN,
            "spark.connect.grpc.binding.address": host,
            "spark.connect.grpc.binding.port": str(port)}


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            return True
    except OSError:
        return False


def serve(master: str, conf: Mapping[str, str], *, host: str, port: int,
          verbose: bool = False, log: Log = print) -> int:
    """Run a Connect server until SIGINT/SIGTERM; the exit status: 130 after SIGINT, 0
    after SIGTERM (a service stopped). `conf` overrides the pipeline's defaults, not the
    binding, which is host and port."""
    from .session import spark_session

    if _listening(host, port):
        raise PipelineError("%s:%d is taken (another server?): give --port another port"
                            % (host, port))
    stop = threading.Event()
    got: list[int] = []

    def on_signal(sig: int, _frame: object) -> None:
        got.append(sig)
        stop.set()

    spark = spark_session(master, {**conf, **server_conf(host, port)}, verbose=verbose,
                          app_name="pubmote-pipeline-server", resident=True)
    try:
        # the plugin starts gRPC as the driver starts; a failed bind is only in Spark's log
        deadline = time.monotonic() + 30
        while not _listening(host, port):
            if time.monotonic() > deadline:
                raise PipelineError("Spark started but does not listen on %s:%d (taken, or "
                                    "not an address of this host?)" % (host, port))
            time.sleep(0.1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        log("Spark Connect server (master %s) listening on sc://%s:%d; stop with Ctrl-C"
            % (master, "[%s]" % host if ":" in host else host, port))
        stop.wait()
    finally:
        spark.stop()
    log("stopped")
    return 128 + signal.SIGINT if got[:1] == [signal.SIGINT] else 0


def parse_url(url: str) -> tuple[str, int]:
    """(host, port) of sc://HOST[:PORT][/;params]; PipelineError when it is no such URL."""
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        port = -1
    if parts.scheme != "sc" or not parts.hostname or port < 1:
        raise PipelineError("--remote wants sc://HOST:PORT (e.g. sc://127.0.0.1:%d), not %r"
                            % (DEFAULT_PORT, url))
    return parts.hostname, port


def remote_session(url: str) -> SparkSession:
    """A Spark Connect session on the server at `url`, or PipelineError in one line when
    nothing listens there (instead of the client's minutes of retries)."""
    host, port = parse_url(url)
    if not _listening(host, port):
        raise PipelineError("no Spark Connect server at %s (start one with `pubmote pipeline "
                            "serve --port %d`)" % (url, port))
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as e:
        raise PipelineError("--remote needs Spark Connect's client libraries (%s): install "
                            "pubmote's `pipeline` extra" % e) from e
    spark = SparkSession.builder.remote(url).getOrCreate()
    from pyspark.sql.connect.client.retries import DefaultPolicy

    # a server restarting is waited for some 15 s, not the client's default 10 minutes:
    # a job whose server is gone says so (and a stopping --follow client stops)
    spark.client.set_retry_policies([DefaultPolicy(max_retries=RETRIES,
                                                   max_backoff=MAX_BACKOFF_MS)])
    return spark


def remote_paths(*paths: str | Path | None) -> list[str | None]:
    """Paths as the server must see them: absolute (the client's working folder is not the
    server's); a URL (hdfs://, s3a://) unchanged."""
    return [None if p is None else str(p) if "://" in str(p) else str(Path(p).resolve())
            for p in paths]
