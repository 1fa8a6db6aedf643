# pytest runs the shared tests on CPython; the runner module and the codec must import.
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "shared"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    """Name the runtime and count the shared tests, as tests/run_shared.py does for
    the MicroPythons."""
    counts = {"passed": 0, "failed": 0}
    for key in counts:
        for rep in terminalreporter.stats.get(key, []):
            if "tests/shared/" in rep.nodeid and rep.when == "call":
                counts[key] += 1
    terminalreporter.write_line(
        "%-45s %4d passed, %d failed" % ("CPython %s, shared tests:" % sys.version.split()[0],
                                          counts["passed"], counts["failed"]))
