"""Suite-wide test settings. make test spreads the tests over pytest-xdist workers (`-n N
--dist loadgroup`): every test is independent (ports reserved per process, peers started
by each test or module), so any worker may take any test, except that the tests sharing
the in-process SparkSession (the `spark` fixture) form two xdist groups, each run by one
worker: two JVMs for them all rather than one per worker that happens to take one (a
JVM's start costs some 25 CPU seconds on these 2 cores). The standalone-cluster test, the
longest, is a group of its own so the others do not wait behind it."""

from __future__ import annotations

import pytest

PIPELINE_TIMEOUT_S = 600


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "early: a test of minutes (tests/host/"
                                       "test_make_targets.py) that xdist should start at once")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/pipeline/") and "spark" in getattr(item, "fixturenames", ()):
            cluster = path.endswith("/test_cluster.py")
            item.add_marker(pytest.mark.xdist_group("spark-cluster" if cluster else "spark"))
            if cluster:
                item.add_marker(pytest.mark.early)
        # the first Spark test on a worker also starts its JVM: on 2 cores kept busy by
        # other workers (and a CPU hog in make test-stress) that alone can take minutes;
        # the timeout is a hang guard, not a speed check
        if path.startswith("tests/pipeline/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))
    start_early(items)


def start_early(items: list[pytest.Item]) -> None:
    """Tests marked `early` (a few minutes each) first: xdist's loadgroup hands out the
    largest group first, then the rest in this order, so these start at once on workers of
    their own rather than near the end, running on alone after the rest. Every worker
    computes the same order."""
    early = [i for i in items if i.get_closest_marker("early") is not None]
    items[:] = early + [i for i in items if i.get_closest_marker("early") is None]
