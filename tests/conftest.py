"""Suite-wide test settings. make test spreads the tests over pytest-xdist workers (`-n N
--dist load`): every test is independent (ports reserved per process, peers started by
each test or module), so any worker may take any test. A worker that runs pipeline tests
starts its own SparkSession (one JVM per worker, shared by its pipeline tests): several
JVMs in parallel beat one worker running every Spark test in a row (measured: 5.8 min
for the whole suite spread, against over 7 min of Spark tests alone on one worker)."""

from __future__ import annotations

import pytest

PIPELINE_TIMEOUT_S = 600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        # the first Spark test on a worker also starts its JVM: on 2 cores kept busy by
        # other workers (and a CPU hog in make test-stress) that alone can take minutes;
        # the timeout is a hang guard, not a speed check
        if path.startswith("tests/pipeline/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))
