"""Suite-wide test settings. make test spreads the tests over pytest-xdist workers (`-n N
--dist load`): every test is independent (ports reserved per process, peers started by
each test or module), so any worker may take any test. The pipeline tests of every worker
share one Spark Connect server (run_services.py: one JVM for the run), which runs their
jobs side by side: spread over the workers they beat one worker running every Spark test
in a row (measured: 5.8 min for the whole suite spread, against over 7 min of Spark tests
alone on one worker)."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import run_services

PIPELINE_TIMEOUT_S = 600
RUN_DIR = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "early: a test of minutes (tests/host/"
                                       "test_make_targets.py) that xdist should start at once")
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        config.stash[RUN_DIR] = run_services.make_run_dir()


def pytest_unconfigure(config: pytest.Config) -> None:
    d = config.stash.get(RUN_DIR, None)
    if d is not None:
        run_services.end_all(d)
        shutil.rmtree(d, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    start_early(config, items)
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        # the first Spark test on a worker also starts its JVM: on 2 cores kept busy by
        # other workers (and a CPU hog in make test-stress) that alone can take minutes;
        # the timeout is a hang guard, not a speed check
        if path.startswith("tests/pipeline/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))


def start_early(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `early` go where `--dist load` starts them at once, each on a worker of
    its own: xdist first hands every worker a run of len(items) / workers / 4 consecutive
    tests, so each goes to the head of one such run; the first run (the Spark group and the
    HIL suite, the longest) is left as it is. Collected in their place they would start
    near the end and run on alone after the rest. Every worker computes the same order."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))
    early = [i for i in items if i.get_closest_marker("early") is not None]
    if workers < 2 or not early:
        return
    rest = [i for i in items if i.get_closest_marker("early") is None]
    run = max(2, len(items) // workers // 4)
    heads = [run * (1 + k % (workers - 1)) + k // (workers - 1) for k in range(len(early))]
    for head, item in sorted(zip(heads, early, strict=True), key=lambda x: x[0]):
        rest.insert(min(head, len(rest)), item)
    items[:] = rest


@pytest.fixture(autouse=True)
def sigint_as_from_a_shell() -> Iterator[None]:
    """Every test starts with SIGINT at Python's default, unblocked, in its worker: an
    ignored or blocked SIGINT is inherited by every process a test starts (across exec),
    and a test that Ctrl-Cs its command would find it deaf. Seen in loaded full runs: from
    some point on, one worker's commands ignored SIGINT, while each test passed alone."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    yield


@pytest.fixture(autouse=True)
def control_endpoint_of_its_own(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every bridge a test starts (in-process or a `pubmote bridge` child) binds its control
    endpoint (`pubmote update`) in a folder of the test's own, not the user's default one
    that bridges of other tests, workers or the user's own would share. A short path: a
    unix socket's is at most 107 bytes."""
    import os
    import shutil
    import tempfile

    if os.environ.get("PUBMOTE_CONTROL"):
        yield
        return
    folder = tempfile.mkdtemp(prefix="pmc-")
    monkeypatch.setenv("PUBMOTE_CONTROL", os.path.join(folder, "bridge.sock"))
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
