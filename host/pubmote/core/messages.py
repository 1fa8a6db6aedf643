"""What the hub relays: one message (topic, payload, where it came from and when), the
listener type, and per-topic statistics for the view."""

from __future__ import annotations

import time
from collections.abc import Callable


class Message:
    """One relayed message. `topic` is the topic's URI as bytes."""

    __slots__ = ("topic", "payload", "origin", "ingress", "t_recv", "t_board", "t_taken",
                 "_line")

    def __init__(self, topic: bytes, payload: bytes, origin: str, ingress: str,
                 t_board: int | None = None, t_recv: float | None = None,
                 t_taken: int | None = None) -> None:
        self.topic = topic
        self.payload = payload
        self.origin = origin
        self.ingress = ingress
        # when the bridge read it (a face's read time for a whole batch), else now
        self.t_recv = time.time() if t_recv is None else t_recv
        self.t_board = t_board  # the board's SignatureTime (ms), when it signs
        # when the publisher took it (ms since 1970 by its clock, set from a gateway's), if
        # it says: docs/protocols/event-time.md
        self.t_taken = t_taken
        self._line: bytes | None = None

    def line(self) -> bytes:
        """The SP form: `<topic URI>|<payload>`, what nanomsg-style filters match against
        (made once: the filters and every SP subscriber use it)."""
        line = self._line
        if line is None:
            line = self._line = self.topic + b"|" + self.payload
        return line

    def age_ms(self) -> float | None:
        """How long before the bridge received it the message was taken (None: not
        known): what tells a reading held during an outage from a fresh one."""
        if self.t_taken is None:
            return None
        return self.t_recv * 1000 - self.t_taken


Listener = Callable[[Message], None]


LAST_PAYLOAD_MAX = 1024  # bytes of a topic's last value kept for the view: bounded per topic


class TopicStats:
    __slots__ = ("count", "last_payload", "last_origin", "last_time", "rate", "mark", "_t0",
                 "_n0")

    def __init__(self) -> None:
        self.count = 0
        self.mark = 0  # the topic table's eviction clock (topic_table.py)
        self.last_payload = b""
        self.last_origin = ""
        self.last_time = 0.0
        self.rate = 0.0
        self._t0 = time.monotonic()
        self._n0 = 0

    def add(self, msg: Message) -> None:
        self.count += 1
        p = msg.payload
        self.last_payload = p if len(p) <= LAST_PAYLOAD_MAX else p[:LAST_PAYLOAD_MAX]
        self.last_origin = msg.origin
        self.last_time = msg.t_recv
        now = time.monotonic()
        if now - self._t0 >= 2.0:
            self.rate = (self.count - self._n0) / (now - self._t0)
            self._t0, self._n0 = now, self.count
