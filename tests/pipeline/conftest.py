"""The pipeline tests share one Spark for the whole pytest run, every worker's (a JVM's
start costs 25-30 CPU seconds; tests/run_services.py): a resident Spark Connect server
(`pubmote pipeline serve`: local[2], 2 shuffle partitions, and the pipeline's own
defaults: UTC, UI off, loopback, quiet logs), which `spark`, a Spark Connect session,
runs the tests' jobs on. The tests that are about
local mode start their own `pubmote pipeline` (test_remote.py, test_stream.py,
test_jvm_archive.py). They import the bridge test helpers (e2e) from tests/host."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# every worker's jobs side by side in one JVM: twice the heap of one job's
SERVER_ARGS = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", "spark.driver.memory=960m"]


@pytest.fixture(scope="session")
def connect_url() -> str:
    """sc://... of the run's shared `pubmote pipeline serve` (every worker's)."""
    from connect_server import ConnectServer
    from run_services import run_dir, shared

    def start(listed: Callable[[int], None]) -> str:
        server = ConnectServer(SERVER_ARGS, run_dir() / "connect-serve.log")
        listed(server.p.pid)
        return server.wait_ready()

    return shared("connect", start)


@pytest.fixture(scope="session")
def spark(connect_url: str) -> Iterator[Any]:
    from pubmote.pipeline.connect import remote_session

    s = remote_session(connect_url)
    yield s
    s.stop()
