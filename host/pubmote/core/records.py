"""The hub's journal records: what became of each message (relayed, then delivered,
dropped or nacked at each egress) and events about boards. The journal is beside the relay,
never in its way: its failures are counted, not raised."""

from __future__ import annotations

import logging
import time
from typing import Any

from pubmote.core.journal import Journal
from pubmote.core.messages import Message

log = logging.getLogger("pubmote.hub")


class JournalFeed:
    """Writes the hub's records to the journal attached (none: nothing is built)."""

    def __init__(self, counters: dict[str, int]) -> None:
        self.journal: Journal | None = None
        self._counters = counters

    @property
    def journaling(self) -> bool:
        """Whether a journal is attached: callers skip building records it would take."""
        return self.journal is not None

    def outcome(self, msg: Message, egress: str | None, outcome: str) -> None:
        """One record: msg relayed (egress None, with its payload), or what became of it at
        one egress (delivered/dropped/nacked). All records of one message share its
        t_bridge, so the pipeline's windows keep them together, and its t_taken (the
        publisher's taken-time, None when it has no synced clock)."""
        j = self.journal
        if j is None:
            return
        rec: dict[str, Any] = {
            "t_board": msg.t_board, "t_bridge": round(msg.t_recv * 1000, 3),
            "t_taken": msg.t_taken,
            "topic": msg.topic.decode(errors="replace"), "origin": msg.origin,
            "ingress": msg.ingress, "egress": egress, "size": len(msg.payload),
            "outcome": outcome}
        if egress is None:
            rec["payload"] = msg.payload.hex()
        else:
            rec["latency_ms"] = round((time.time() - msg.t_recv) * 1000, 3)
        self._write(j, rec)

    def event(self, outcome: str, origin: str, ingress: str, **extra: Any) -> None:
        """A record about a board rather than a message (board_up, board_down,
        fetch_failed), timed now."""
        if self.journal is not None:
            self._write(self.journal, {
                "t_bridge": round(time.time() * 1000, 3), "origin": origin,
                "ingress": ingress, "outcome": outcome, **extra})

    def _write(self, j: Journal, rec: dict[str, Any]) -> None:
        # the journal holds what the disk refuses itself; any other failure of it is
        # counted here, not raised into the relay
        try:
            j.record(rec)
        except Exception:
            self._counters["journal_failures"] += 1
            if self._counters["journal_failures"] == 1:
                log.exception("journal failed (counted in journal_failures)")
