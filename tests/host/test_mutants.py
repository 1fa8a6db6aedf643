"""The mutants of tests/mutants.py: each deliberately broken build must fail the test named
to catch it, so a test that passes whatever the code does cannot creep back. Every
mutant's break point must still stand in its file, once, and its test must still exist
(a mutant whose line was rewritten kills nothing). A representative subset runs here, one
per layer (DHT, hub filters with bridges, CLI help, firmware on a simulated board, the
shared codec, GossipSub), with one control on the unbroken copy: about 23 s of CPU for
this file (measured) against about 32 s for all nine mutants. The rest (M3, M6, M8) run
with `.venv/bin/python tests/mutants.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_HERE = ("M1", "M2", "M4", "M5", "M7", "M9")


def _mutants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "tests" / "mutants.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MUTANTS = _mutants()
BY_ID = {m.label.split()[0]: m for m in MUTANTS.MUTANTS}


def test_every_mutant_still_has_its_break_point_and_its_test() -> None:
    assert set(RUN_HERE) <= set(BY_ID)
    for key, m in BY_ID.items():
        assert (ROOT / m.path).read_text().count(m.old) == 1, (key, m.path)
        path, _, func = m.test.partition("::")
        assert (ROOT / path).is_file(), (key, path)
        if func:
            assert "def %s(" % func in (ROOT / path).read_text(), (key, m.test)


def test_the_unbroken_copy_passes_the_mutants_test() -> None:
    # a control: the copy (its packages, simulated boards and bridge) runs the test of a
    # mutant that needs all of them and it passes, so a killed mutant is the break's doing
    passed, said = MUTANTS.run(BY_ID["M5"], timeout_s=110, mutate=False)
    assert passed, said


@pytest.mark.parametrize("key", RUN_HERE)
def test_mutant_is_killed(key: str) -> None:
    killed, said = MUTANTS.run(BY_ID[key], timeout_s=110)
    assert killed, "%s survived its test %s:\n%s" % (BY_ID[key].label, BY_ID[key].test, said)
