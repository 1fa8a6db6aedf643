"""The pipeline tests share one SparkSession for the whole pytest run (starting a JVM costs
seconds): local[2], UI off, 2 shuffle partitions, UTC, loopback, quiet logs. They import
the bridge test helpers (e2e) from tests/host."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pubmote.pipeline.session import spark_session

    s = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                   "spark.ui.enabled": "false",
                                   "spark.sql.session.timeZone": "UTC",
                                   "spark.driver.host": "127.0.0.1"},
                      app_name="pubmote-tests")
    yield s
    s.stop()
