"""The bridge's last warnings, kept for the live view: a logging handler holding the last
few WARNING and ERROR lines (with their time) in a bounded ring, so that what `--no-view`
would log is on the screen too, not lost behind the redrawn tables."""

from __future__ import annotations

import logging
import time
from collections import deque

from pubmote.core.display import printable

RECENT_MAX = 6  # lines the view has room for under its tables
LINE_MAX = 300  # characters of one message shown (the rest is in the log)


class RecentWarnings(logging.Handler):
    """The last `maxlen` records at WARNING or above, as one-line strings; `seen` counts
    every one taken in, so the view can say how many it no longer shows."""

    def __init__(self, maxlen: int = RECENT_MAX) -> None:
        super().__init__(logging.WARNING)
        self.ring: deque[str] = deque(maxlen=maxlen)
        self.seen = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is still a warning
            msg = str(record.msg)
        # the first line only (a traceback stays in the log), escaped: messages carry
        # peer-supplied text
        first = msg.splitlines()[0] if msg else ""
        text = printable(first)
        if len(text) > LINE_MAX:
            text = text[: LINE_MAX - 1] + "…"
        if record.exc_info or len(msg.splitlines()) > 1:
            text += " (more in the log)"
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        self.ring.append("%s %s %s: %s" % (stamp, record.levelname, record.name, text))
        self.seen += 1

    def lines(self) -> list[str]:
        """The kept lines, oldest first."""
        return list(self.ring)


def install(logger: logging.Logger | None = None,
            maxlen: int = RECENT_MAX) -> RecentWarnings:
    """A RecentWarnings added to `logger` (default the root logger, where every pubmote
    logger's records arrive); remove it with logger.removeHandler when done."""
    handler = RecentWarnings(maxlen)
    (logger or logging.getLogger()).addHandler(handler)
    return handler
