"""How the suite is spread over pytest-xdist workers (make test runs `-n N --dist
loadgroup`): tests are independent and go to whichever worker is free, except where an
expensive fixture is shared: the pipeline tests share one SparkSession (one JVM), and a
module with module-scoped peers (the libp2p interop peers, the HIL board) stays on one
worker so its peers start once."""

from __future__ import annotations

import pytest

PIPELINE_TIMEOUT_S = 600
_SHARED_MODULE_FIXTURES = ("tests/interop/libp2p/", "tests/hil/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/pipeline/"):
            item.add_marker(pytest.mark.xdist_group("spark"))
            # the first Spark test of a run also starts the shared JVM: on 2 cores kept busy
            # by other workers (and a CPU hog in make test-stress) that alone can take
            # minutes; the timeout is a hang guard, not a speed check
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))
        elif path.startswith(_SHARED_MODULE_FIXTURES):
            item.add_marker(pytest.mark.xdist_group(path))
