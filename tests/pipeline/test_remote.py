"""`pubmote pipeline serve` and `--remote`: the same journal through a local-mode run and
through the shared Connect server gives the same tables (and both equal the plain-Python
recomputation); the client needs no Java; clear one-line errors for a missing server, a
taken port and a non-loopback address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from jobs import jvms

import oracle
from pubmote.pipeline.synth import records, write_journal

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
W_KEYS, H_KEYS = ("window_start", "topic", "origin"), ("window_start", "node")


def _tables(spark: Any, out: Path) -> tuple[dict[Any, Any], dict[Any, Any]]:
    return (oracle.table_rows(spark.read.parquet(str(out / "windows")), W_KEYS),
            oracle.table_rows(spark.read.parquet(str(out / "health")), H_KEYS))


def _watch_jvms(p: subprocess.Popen[str], seen: dict[int, str]) -> None:
    """The command lines of p's Java descendants, until p ends."""
    while p.poll() is None:
        seen.update(jvms(p.pid))
        time.sleep(0.1)


def test_local_and_remote_runs_write_the_same_tables(spark: Any, connect_url: str,
                                                      tmp_path: Path) -> None:
    recs = list(records(1500, boards=3, subscribers=2, seed=13))
    write_journal(tmp_path / "j", iter(recs), per_file=2000)
    local = subprocess.Popen(  # local mode, its own JVM, beside the remote run
        [PUBMOTE, "pipeline", str(tmp_path / "j"), "--out", str(tmp_path / "local"),
         "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, str] = {}  # the local run's JVM, seen while it runs
    watch = threading.Thread(target=_watch_jvms, args=(local, seen), daemon=True)
    watch.start()
    try:
        # relative paths from another working folder than the server's, and no Java at
        # all: the client starts no JVM
        remote = subprocess.run(
            [PUBMOTE, "pipeline", "j", "--out", "remote", "--report", "rep",
             "--remote", connect_url], cwd=tmp_path, capture_output=True, text=True,
            timeout=600, env=dict(os.environ, JAVA_HOME=str(tmp_path / "no-java")))
    finally:
        out, _ = local.communicate(timeout=600)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert local.returncode == 0, out[-3000:]
    watch.join(timeout=60)
    # a short run (backlog.short_run): the JVM keeps to its first JIT compiler
    assert [c for c in seen.values() if "-XX:TieredStopAtLevel=1" in c], seen
    assert "pipeline: wrote windows" in remote.stderr
    assert (tmp_path / "rep" / "index.html").exists() and (tmp_path / "rep" / "rate.png").exists()
    got_w, got_h = _tables(spark, tmp_path / "remote")
    want_w, want_h = _tables(spark, tmp_path / "local")
    assert len(want_w) >= 15 and len(want_h) >= 20
    oracle.assert_same(got_w, want_w)
    oracle.assert_same(got_h, want_h)
    oracle.assert_same(got_w, oracle.windows(recs))
    oracle.assert_same(got_h, oracle.health(recs))


def test_remote_without_a_server_says_so(tmp_path: Path) -> None:
    write_journal(tmp_path / "j", records(10))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path / "j"), "--out",
                        str(tmp_path / "out"), "--remote", "sc://127.0.0.1:%d" % port],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip().splitlines() == [
        "pubmote pipeline: no Spark Connect server at sc://127.0.0.1:%d (start one with "
        "`pubmote pipeline serve --port %d`)" % (port, port)]
    assert time.monotonic() - t0 < 60  # not the client's minutes of retries
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path / "j"), "--remote", "http://x"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "not a Spark Connect URL" in p.stderr
    p = subprocess.run([PUBMOTE, "pipeline", str(tmp_path / "j"), "--remote",
                        "sc://127.0.0.1:%d" % port, "--master", "local[1]"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "give them to `pubmote pipeline serve`" in p.stderr


def test_serve_refuses_what_it_should_not_do(connect_url: str) -> None:
    p = subprocess.run([PUBMOTE, "pipeline", "serve", "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--allow-remote-clients" in p.stderr, p.stderr
    port = connect_url.rsplit(":", 1)[1]
    p = subprocess.run([PUBMOTE, "pipeline", "serve", "--port", port],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and ("127.0.0.1:%s is taken" % port) in p.stderr, p.stderr
