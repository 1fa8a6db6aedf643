"""A failing disk under the journal: faults injected at the OS boundary (journal.OS) for
every errno class the journal names (disk full, quota, read-only, too many open files,
I/O error, no permission) on each operation it makes (open, write, fsync, rename), the
folder removed mid-run, and, where the machine lets us mount one, a real small file system
run out of space and of inodes (those two and the removed folder are scenarios of
`make harden-report` too: tests/adversarial/scenarios/journal.py). In each: the relay never stops (every message a board saw
acked reaches the SP subscriber, with no long pause), the journal holds what the disk
refused and writes it, in order, once the fault clears (none lost), and its counters say
exactly what failed."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from scenarios import journal as journal_scenarios
from scenarios.journal import SEQ, TimedCollector, relayed_seqs, with_board

from e2e import journal_records, wait_until
from pubmote.core import journal
from pubmote.core.journal import Journal

# the errno classes the journal must survive, injected; ENOENT is the folder really removed
ERRNOS = [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.EIO,
          errno.EACCES]
OPS = {"open": "open", "write": "write", "fsync": "fsync", "rename": "replace"}
MAX_PAUSE_S = 2.0  # the board publishes every 20 ms; the relay may never stall this long


class Fault:
    """One of the journal's OS calls made to fail with `err` while armed; the raises are
    counted. A write fails the way a filling disk does: a short write first, then the
    error."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, op: str) -> None:
        self.op = op
        self.err: int | None = None
        self.raised: dict[str, int] = {}
        self._short = False
        orig = getattr(journal.OS, OPS[op])

        def call(*args: Any, **kw: Any) -> Any:
            if self.err is None:
                return orig(*args, **kw)
            if op == "write" and self._short and len(args[1]) > 1:
                self._short = False
                return orig(args[0], bytes(args[1])[: len(args[1]) // 2])
            name = errno.errorcode[self.err]
            self.raised[name] = self.raised.get(name, 0) + 1
            raise OSError(self.err, os.strerror(self.err))

        monkeypatch.setattr(journal.OS, OPS[op], staticmethod(call))

    def arm(self, err: int) -> None:
        self.err, self._short = err, True

    def clear(self) -> None:
        self.err = None


def _journal_op_config(op: str) -> dict[str, Any]:
    # small files, so opens and renames happen often; fsync on every record for "fsync"
    return {"journal_max_bytes": 4096, "journal_fsync": "always" if op == "fsync" else "rotate"}


def _check(r: dict[str, Any], journaled: list[int]) -> None:
    s = r["status"]
    print("acked %d, acked lost %d, longest relay pause %.2f s, journaled %d, journal %s" % (
        r["acked"], r["acked_lost"], r["max_pause_s"], len(journaled),
        {k: s[k] for k in ("records", "records_lost", "write_errors", "errors")}))
    assert r["acked"] > 50 and r["acked_lost"] == 0, r["lost_examples"]
    assert r["within_bound"], r
    assert r["max_pause_s"] < MAX_PAUSE_S, r
    assert s["records_lost"] == 0 and s["backlog_records"] == 0 and not s["failing"], s
    # every relayed message journaled, once, in order
    assert journaled == sorted(set(journaled)), "journal out of order or doubled"
    assert set(r["received"]) <= set(journaled), sorted(set(r["received"]) - set(journaled))


# -- the journal alone: every errno on every operation, quickly


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("err", ERRNOS, ids=[errno.errorcode[e] for e in ERRNOS])
def test_journal_holds_and_writes_back_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                op: str, err: int) -> None:
    fault = Fault(monkeypatch, op)
    j = Journal(tmp_path, max_bytes=600, max_age_s=3600,
                fsync="always" if op == "fsync" else "rotate")
    j.open()
    n = 0
    for phase in ("healthy", "fault", "after"):
        if phase == "fault":
            fault.arm(err)
        elif phase == "after":
            fault.clear()
        for _ in range(40):
            j.record({"n": n, "pad": "x" * 40})  # never raises
            n += 1
            if n % 10 == 0:
                j.tick()
        if phase == "fault":
            name = errno.errorcode[err]
            s = j.status()
            assert s["failing"] and fault.raised[name] > 0, s
            assert s["errors"] == {name: fault.raised[name]}, (s, fault.raised)
            assert name in s["last_error"]
            if op != "rename":  # a rename that fails leaves records going to the file
                assert s["backlog_records"] > 0, s
    j.tick()
    s = j.status()
    assert not s["failing"] and s["backlog_records"] == 0 and s["records_lost"] == 0, s
    j.close()
    assert [r["n"] for r in journal_records(tmp_path)] == list(range(n))
    assert not list(tmp_path.glob(".journal-*")), "a file left in progress"
    assert j.counters["records"] == n
    assert j.counters["write_errors"] == sum(fault.raised.values())


def test_backlog_is_bounded_and_its_drops_counted(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fault = Fault(monkeypatch, "write")
    j = Journal(tmp_path, backlog_records=50, backlog_bytes=1 << 20)
    j.open()
    fault.arm(errno.ENOSPC)
    for n in range(200):
        j.record({"n": n})
    assert j.status()["backlog_records"] == 50 and j.status()["records_lost"] == 150
    j2 = Journal(tmp_path / "b", backlog_records=10_000, backlog_bytes=2000)
    j2.open()
    fault2 = Fault(monkeypatch, "write")
    fault2.arm(errno.ENOSPC)
    for n in range(200):
        j2.record({"n": n, "pad": "x" * 40})
    assert j2.status()["backlog_bytes"] <= 2000 and j2.status()["records_lost"] > 0
    fault.clear()
    fault2.clear()
    j.close()
    # the newest 50 were kept, and written in order
    assert [r["n"] for r in journal_records(tmp_path)] == list(range(150, 200))


def test_a_fault_at_the_stop_is_counted_and_its_file_recovered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rename = Fault(monkeypatch, "rename")
    j = Journal(tmp_path)
    j.open()
    for n in range(5):
        j.record({"n": n})
    write = Fault(monkeypatch, "write")
    write.arm(errno.EIO)
    j.record({"n": 5})  # held: the disk refuses it
    rename.arm(errno.EROFS)
    j.close()  # what cannot be written is lost and said; the file stays in progress
    assert j.status()["records_lost"] == 1
    assert len(list(tmp_path.glob(".journal-*"))) == 1
    rename.clear()
    write.clear()
    j2 = Journal(tmp_path)
    j2.open()  # the next start puts it in place
    assert [r["n"] for r in journal_records(tmp_path)] == list(range(5))


def test_removed_folder_is_made_again_and_its_open_file_rewritten(tmp_path: Path) -> None:
    d = tmp_path / "journal"
    j = Journal(d, max_bytes=1 << 20)
    j.open()
    consumed: list[dict[str, Any]] = []
    n = 0
    for when in ("file open", "between files", "file open"):
        for _ in range(30):
            j.record({"n": n})
            n += 1
        if when == "between files":
            j.rotate()
        consumed += journal_records(d)  # a reader takes the finished files, then
        shutil.rmtree(d)               # the whole folder is removed
        for _ in range(5):
            j.record({"n": n})  # still written (to a removed file, or a folder made again)
            n += 1
        j.tick()
    j.close()
    assert [r["n"] for r in consumed + journal_records(d)] == list(range(n))
    s = j.status()
    assert s["records_lost"] == 0 and s["errors"] == {"ENOENT": 3}, s
    # the records of the two files open when their folder went (35 and 40), written again
    assert j.counters["salvaged"] == 75


def test_a_folder_it_cannot_make_at_start_is_a_fault_until_it_can(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the journal's parent folder should be")
    d = blocker / "journal"
    j = Journal(d)
    j.open()  # no exception: the bridge starts, the journal retries
    for n in range(3):
        j.record({"n": n})
        j.tick()
    s = j.status()
    assert s["failing"] and s["backlog_records"] == 3 and "ENOTDIR" in s["errors"], s
    blocker.unlink()
    j.tick()
    assert not j.status()["failing"] and j.status()["backlog_records"] == 0
    j.close()
    assert [r["n"] for r in journal_records(d)] == [0, 1, 2]


# -- a bridge with a simulated board: the relay goes on, the journal catches up


@pytest.mark.parametrize("op", list(OPS))
def test_bridge_relays_through_every_journal_fault(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   op: str) -> None:
    fault = Fault(monkeypatch, op)
    jdir = tmp_path / "journal"

    async def damage(bridge: Any, col: TimedCollector) -> dict[str, Any]:
        j = bridge.journal
        for err in ERRNOS:
            name = errno.errorcode[err]
            fault.arm(err)
            # the first failure, and a retry (at a tick) that fails again
            await wait_until(lambda name=name: j.status()["errors"].get(name, 0) >= 2, 30,
                             "the journal to meet %s on %s twice" % (name, op))
            assert j.status()["failing"]
            n = len(col.lines)
            await col.wait_for(SEQ, n + 10)  # the relay goes on meanwhile
            fault.clear()
            await wait_until(lambda: not j.status()["failing"], 30,
                             "the journal to recover from %s on %s" % (name, op))
        return {"raised": dict(fault.raised)}

    r = asyncio.run(with_board(tmp_path, jdir, damage, **_journal_op_config(op)))
    _check(r, relayed_seqs(journal_records(jdir)))
    assert r["status"]["errors"] == r["raised"], r  # every failure counted, by errno
    assert set(r["raised"]) == {errno.errorcode[e] for e in ERRNOS}


def test_bridge_relays_while_its_journal_folder_is_removed(tmp_path: Path) -> None:
    r = asyncio.run(journal_scenarios.journal_removed(tmp_path))
    _check(r, r["journaled"])
    assert r["salvaged"] > 0 and r["status"]["errors"]["ENOENT"] >= 3, r


# -- a real small file system (root only)


@pytest.mark.parametrize("what", ["space", "inodes"])
def test_bridge_journal_on_a_full_file_system(tmp_path: Path, what: str) -> None:
    r = asyncio.run(journal_scenarios.journal_full(tmp_path, what=what))
    if "skipped" in r:
        print(r["skipped"])
        pytest.skip(r["skipped"] + ": real-file-system variant skipped")
    _check(r, r["journaled"])
    assert r["fills"] >= 2 and r["held_while_full"] > 0, r  # held in memory while full
    assert r["status"]["errors"].get("ENOSPC", 0) >= 2, r


def test_the_journal_state_is_shown_in_the_status_line_and_the_view(tmp_path: Path) -> None:
    from rich.console import Console

    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config
    from pubmote.gateway.view import render

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")

    async def run() -> tuple[str, str]:
        cfg = load_config(None, {"journal": str(blocker / "journal")})
        async with Bridge(cfg) as bridge:  # starts: the journal is beside the relay
            assert bridge.journal is not None
            bridge.journal.record({"n": 1})
            console = Console(record=True, width=400)
            console.print(render(bridge))
            return bridge.status(), console.export_text()

    status, view = asyncio.run(run())
    for text in (status, view):
        assert "journal %s" % (blocker / "journal") in text, text
        assert "1 held in memory" in text and "FAILING" in text and "ENOTDIR" in text, text
