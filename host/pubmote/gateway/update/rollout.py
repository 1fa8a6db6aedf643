"""A roll-out: offer the package to each board, call it to fetch (again every 2 s until it
does), follow its transfer and wait for its report (healthy, rolledback, failed) within the
update's timeout. With a canary of N, the first N boards go first; the rest only when all
of those came back healthy, else they are skipped. Progress goes to emit as it changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from pubmote.gateway.update.package import AppPackage
from pubmote.gateway.update.producer import FINAL, BoardUpdate, UpdateProducer

OFFER_S = 30.0  # a board that has not fetched its manifest by then is not taking it
STALL_S = 30.0  # a transfer that has not moved for this long has failed
REPORT_SLACK_S = 30.0  # beyond --timeout: the reboot, a rollback's reboot, the report
POLL_S = 0.2
TRIGGER_EVERY_S = 2.0
RETRIGGER_S = 3.0  # a transfer that has not moved for this long is called for again

Emit = Callable[[dict[str, Any]], None]


class Rollout:
    """Update boards (names, in order) with package; run() says whether all are healthy."""

    def __init__(self, producer: UpdateProducer, package: AppPackage, boards: list[str], *,
                 canary: int = 0, timeout_s: float = 60.0, grace_s: float = 5.0,
                 emit: Emit | None = None) -> None:
        self.producer = producer
        self.package = package
        self.boards = boards
        self.canary = canary
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.emit = emit or (lambda _: None)
        self.updates: dict[str, BoardUpdate] = {}

    async def run(self) -> bool:
        t0 = time.monotonic()
        for b in self.boards:
            u = self.producer.offer(b, self.package, self.timeout_s, self.grace_s)
            self.updates[b] = u
            self._emit(u)
        waves = [self.boards]
        if 0 < self.canary < len(self.boards):
            waves = [self.boards[:self.canary], self.boards[self.canary:]]
        ok = True
        for k, wave in enumerate(waves):
            await asyncio.gather(*(self._one(self.updates[b]) for b in wave))
            if any(self.updates[b].state != "healthy" for b in wave):
                ok = False
                if k == 0 and len(waves) > 1:
                    bad = [b for b in wave if self.updates[b].state != "healthy"]
                    for b in waves[1]:
                        self.updates[b].set("skipped", "canary %s not healthy" % ", ".join(bad))
                        self._emit(self.updates[b])
                    break
        self.emit({"event": "done", "ok": ok, "seconds": round(time.monotonic() - t0, 1),
                   "boards": [u.view() for u in self.updates.values()]})
        return ok

    def _emit(self, u: BoardUpdate) -> None:
        self.emit(dict(u.view(), event="board"))

    async def _one(self, u: BoardUpdate) -> None:
        u.t_start = time.monotonic()
        u.set("offered")
        seen = (u.state, u.bytes)
        self._emit(u)
        offered_at = last_move = time.monotonic()
        next_trigger = 0.0
        deadline: float | None = None
        while u.state not in FINAL:
            now = time.monotonic()
            if u.state == "offered":
                if now >= next_trigger:
                    self.producer.trigger(u)
                    next_trigger = now + TRIGGER_EVERY_S
                if now - offered_at > OFFER_S:
                    u.set("failed", "did not fetch its update within %ds (not connected?)"
                          % OFFER_S)
            elif u.state == "fetching" and len(u.fetched) < self.package.segments:
                if now - last_move > RETRIGGER_S and now >= next_trigger:
                    # a board that restarted mid-transfer starts it again (a running one
                    # ignores the call)
                    self.producer.trigger(u)
                    next_trigger = now + TRIGGER_EVERY_S
                if now - last_move > STALL_S:
                    u.set("failed", "transfer stalled at %d of %d bytes" % (u.bytes,
                                                                           u.total))
            else:  # staged (or all fetched, its word lost): rebooting, on trial
                if u.state == "fetching" and now - last_move > RETRIGGER_S \
                        and now >= next_trigger:
                    # all fetched, no word since: the power may have gone before the board
                    # switched (called again, it finishes from what it wrote) or the word
                    # was lost (called again, a board that has the update ignores the call)
                    self.producer.trigger(u)
                    next_trigger = now + TRIGGER_EVERY_S
                if deadline is None:
                    deadline = now + self.timeout_s + REPORT_SLACK_S
                elif now > deadline:
                    u.set("timeout", "no report within --timeout %gs + %ds after it was "
                          "staged" % (self.timeout_s, REPORT_SLACK_S))
            if (u.state, u.bytes) != seen:
                seen = (u.state, u.bytes)
                last_move = now
                self._emit(u)
            await asyncio.sleep(POLL_S)
        self._emit(u)
