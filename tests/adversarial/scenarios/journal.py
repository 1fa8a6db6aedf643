"""A failing disk under the journal while a board publishes every 20 ms: the folder
removed at different points of a file's life, and a real small file system (tmpfs, where
the machine lets us mount one) run out of space or of inodes. Each returns the board's
acked and lost messages, the relay's longest pause, and the journal's state."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pynng
from measure import Bound, Measure

from e2e import (
    Collector,
    boards_registered,
    bridge_with_boards,
    free_port,
    journal_records,
    wait_until,
)
from faults import _acked_arrive, sim_fleet

SEQ = b"/test/sim1/seq|"


class TimedCollector(Collector):
    """A Collector that also keeps when each message arrived."""

    def __init__(self, url: str, *prefixes: bytes) -> None:
        self.times: list[float] = []
        super().__init__(url, *prefixes)

    async def _run(self) -> None:
        with contextlib.suppress(pynng.Closed):
            while True:
                self.lines.append(await self.sock.arecv())
                self.times.append(time.monotonic())

    def max_pause_s(self, since: float) -> float:
        t = [x for x in self.times if x >= since]
        return max((b - a for a, b in itertools.pairwise(t)), default=0.0)


def relayed_seqs(recs: list[dict[str, Any]]) -> list[int]:
    return [int(bytes.fromhex(r["payload"]).split(b"|")[0]) for r in recs
            if r.get("outcome") == "relayed" and r.get("topic") == "/test/sim1/seq"]


async def with_board(tmp: Path, jdir: Path, body: Callable[[Any, TimedCollector],
                                                           Awaitable[dict[str, Any]]],
                     m: Measure | None = None, **cfg: Any) -> dict[str, Any]:
    """A bridge journaling into jdir, one simulated board publishing every 20 ms (logging
    what it saw acked), an SP subscriber; body(bridge, collector) does the damage. Then the
    board stops and the figures are gathered (the journal closed with the bridge). The
    relay's longest pause is the genuine board's recovery: it is never unserved longer."""
    m = m or Measure()
    url = "tcp://127.0.0.1:%d" % free_port()
    extra = {"seq_period_ms": 20, "acked_log": "acked.log"}
    async with bridge_with_boards(tmp / "sim", 1, app="probe_app", extra=extra, sp_pub=[url],
                                  journal=str(jdir), **cfg) as bridge:
        m.bound = Bound(bridge.cfg).sp_pub(1).journal()
        await boards_registered(bridge, ["sim1"])
        col = TimedCollector(url, SEQ)
        try:
            await col.wait_for(SEQ, 10)
            m.before()
            t0 = time.monotonic()
            figures = await body(bridge, col)
            n = len(col.lines)
            await col.wait_for(SEQ, n + 20)  # a genuine board still served after it all
            m.sample()
            pause = col.max_pause_s(t0)
            m.recovered(pause)
            assert bridge.fleet is not None
            sim_fleet(bridge).boards[0].power_off()
            acked, lost = await _acked_arrive(col, SEQ, tmp / "sim" / "acked.log")
            m.acked_figures(len(acked), lost)
            received = sorted({int(x[len(SEQ):]) for x in col.lines})
        finally:
            col.close()
        j = bridge.journal
        assert j is not None
    status = j.status()  # after the bridge closed it
    return m.figures(max_pause_s=round(pause, 2), received=received, status=status, **figures)


async def journal_removed(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """The journal's folder removed three times (at different points of a file's life),
    each time after a reader took its finished files."""
    jdir = tmp / "journal"
    consumed: list[dict[str, Any]] = []

    async def damage(bridge: Any, col: TimedCollector) -> dict[str, Any]:
        j = bridge.journal
        removals = max(3, round(3 * scale))
        for k in range(removals):
            await asyncio.sleep(0.3 * (k % 3))  # at different points of a file's life
            before = j.status()["errors"].get("ENOENT", 0)
            consumed.extend(journal_records(jdir))  # a reader takes the finished files,
            shutil.rmtree(jdir)  # then the folder goes (nothing runs in between)

            def noticed(b: int = before) -> bool:
                return bool(j.status()["errors"].get("ENOENT", 0) > b)

            await wait_until(noticed, 30, "the journal to notice its folder gone")
            await wait_until(lambda: jdir.is_dir() and not j.status()["failing"], 30,
                             "the journal to write again")
        return {"removals": removals, "salvaged": j.counters["salvaged"]}

    r = await with_board(tmp, jdir, damage, journal_max_bytes=1 << 20)
    r["journaled"] = relayed_seqs(consumed + journal_records(jdir))
    return r


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[str | None]:
    """A small tmpfs mounted at `where` (root only): yields None, or why it could not."""
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        yield "cannot mount a small tmpfs here (%s)" % (
            (p.stderr or p.stdout).strip() or "mount exit %d" % p.returncode)
        return
    try:
        yield None
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


FULL = {"space": "size=64k,nr_inodes=4096", "inodes": "size=8m,nr_inodes=16"}


async def journal_full(tmp: Path, scale: float = 1, what: str = "space") -> dict[str, Any]:
    """The journal on a real small file system that runs out of `what` (space, inodes)
    twice, a reader making room each time: {"skipped": why} where no tmpfs can be
    mounted."""
    consumed: list[dict[str, Any]] = []
    with tmpfs(tmp / "mnt", FULL[what]) as cannot:
        if cannot is not None:
            return {"skipped": cannot}
        jdir = tmp / "mnt" / "journal"

        async def damage(bridge: Any, col: TimedCollector) -> dict[str, Any]:
            j = bridge.journal
            fills, held = 0, []
            for _ in range(max(2, round(2 * scale))):
                # let it fill up: the disk refuses, the relay goes on
                await wait_until(lambda: j.status()["failing"], 60,
                                 "the %s of the file system to run out" % what)
                fills += 1
                n = len(col.lines)
                await col.wait_for(SEQ, n + 25)
                held.append(j.status()["backlog_records"])
                consumed.extend(journal_records(jdir))  # a reader takes the finished files
                for f in jdir.glob("journal-*.jsonl"):
                    f.unlink()
                await wait_until(lambda: not j.status()["failing"], 30,
                                 "the journal to write again once there is room")
            return {"fills": fills, "held_while_full": min(held)}

        r = await with_board(tmp, jdir, damage, journal_max_bytes=6000)
        r["journaled"] = relayed_seqs(consumed + journal_records(jdir))
    return r
