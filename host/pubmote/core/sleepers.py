"""Sleeping boards' sessions (docs/protocols/sleep.md): a board that announces a sleep in
its registration keeps, on the bridge, its filters and a queue of what is published for it,
bounded in messages and bytes (the oldest dropped, counted and journaled), until it wakes
and registers again (the queue then drains through the ordinary acked delivery) or its
session expires: session_expiry_s after it was due back, the board is forgotten with its
queue (counted), as an MQTT broker ends a persistent session past its expiry interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pubmote.core.messages import Message
from pubmote.core.records import JournalFeed
from pubmote.core.registry import BoardState

log = logging.getLogger("pubmote.hub")

# what a queued message costs against sleep_queue_bytes besides its topic and payload
MESSAGE_OVERHEAD = 64


def message_bytes(msg: Message) -> int:
    return len(msg.topic) + len(msg.payload) + MESSAGE_OVERHEAD


class SleepSessions:
    """The sessions of the boards asleep now, by name; `clock_s` (seconds, time.time by
    default) times their wake-ups and expiry; `forget(b, why)` takes an expired board out
    of the hub's table; `watch()` is called when the first board falls asleep (the hub then
    sweeps every second while any sleeps)."""

    def __init__(self, *, queue_max: int, queue_bytes: int, expiry_s: float,
                 counters: dict[str, int], feed: JournalFeed,
                 forget: Callable[[BoardState, str], None],
                 watch: Callable[[], None] | None = None,
                 clock_s: Callable[[], float] = time.time) -> None:
        self.queue_max = queue_max
        self.queue_bytes = queue_bytes
        self.expiry_s = expiry_s
        self._counters = counters
        self._feed = feed
        self._forget = forget
        self._clock_s = clock_s
        self._watch = watch
        self._asleep: dict[str, BoardState] = {}
        self._bytes: dict[str, int] = {}  # the bytes each sleeper's queue holds
        for k in ("sleeps", "wakes", "sleep_queued", "sleep_dropped", "sleep_expired",
                  "sleep_requeued", "sleep_retried", "sessions_expired"):
            counters.setdefault(k, 0)

    def __len__(self) -> int:
        return len(self._asleep)

    def fall_asleep(self, b: BoardState, sleep_ms: int) -> None:
        """b announced a sleep of sleep_ms: hold its queue (trimmed to the bounds) until it
        registers again."""
        now = self._clock_s()
        b.sleeper = True
        b.asleep_since = now
        b.wake_due = now + sleep_ms / 1000
        if b.name not in self._asleep:
            self._counters["sleeps"] += 1
        first = not self._asleep
        self._asleep[b.name] = b
        if first and self._watch is not None:
            self._watch()
        self._bytes[b.name] = sum(message_bytes(m) for m in b.outbox)
        self._trim(b)
        self._feed.event("board_asleep", b.name, b.face.label, sleep_ms=sleep_ms)
        log.info("board %s asleep for %d ms (%d queued)", b.name, sleep_ms, len(b.outbox))

    def wake(self, b: BoardState) -> bool:
        """b registered without announcing a sleep: its session is live again and its queue
        drains. False when it was not asleep."""
        if self._asleep.pop(b.name, None) is None:
            return False
        self._bytes.pop(b.name, None)
        late_s = self._clock_s() - b.wake_due
        b.asleep_since = None
        self._counters["wakes"] += 1
        log.info("board %s awake (%+.1f s against its announced sleep), %d queued", b.name,
                 late_s, len(b.outbox))
        return True

    def admit(self, b: BoardState, msg: Message) -> None:
        """Queue msg for sleeping b, dropping its oldest beyond the bounds."""
        b.outbox.append(msg)
        self._counters["sleep_queued"] += 1
        self._bytes[b.name] = self._bytes.get(b.name, 0) + message_bytes(msg)
        self._trim(b)

    def keep_trying(self, b: BoardState, silent_s: float) -> bool:
        """A notify to b went unanswered through a round of retries: True to send it
        again (same message, same NotifyNonce) for another round. So for a board that has
        slept (its held messages are promised at least once), awake, on its face, and
        heard from (any packet: a registration, a fetch, an ack) in the last silent_s
        (two rounds): alive, only slow (a board busy right after its wake, an emulated
        board on a loaded host), so its message is not dropped. A board silent longer is
        given up on as any other."""
        if not (b.sleeper and b.asleep_since is None and b.face.up and not b.down
                and time.monotonic() - b.heard_s < silent_s):
            return False
        self._counters["sleep_retried"] += 1
        return True

    def requeue(self, b: BoardState, msg: Message) -> None:
        """A delivery to b failed because it fell asleep meanwhile: msg goes first again."""
        b.outbox.appendleft(msg)
        self._counters["sleep_requeued"] += 1
        if b.name in self._asleep:
            self._bytes[b.name] = self._bytes.get(b.name, 0) + message_bytes(msg)
            self._trim(b)

    def _trim(self, b: BoardState) -> None:
        held = self._bytes.get(b.name, 0)
        while b.outbox and (len(b.outbox) > self.queue_max or held > self.queue_bytes):
            old = b.outbox.popleft()
            held -= message_bytes(old)
            b.counters["dropped"] += 1
            self._counters["sleep_dropped"] += 1
            self._feed.outcome(old, b.name, "dropped")
        self._bytes[b.name] = held

    def sweep(self) -> int:
        """End the sessions past their expiry: each board forgotten, its queue dropped
        (counted in sleep_expired); the number ended."""
        now = self._clock_s()
        ended = [b for b in self._asleep.values() if now > b.wake_due + self.expiry_s]
        for b in ended:
            self._asleep.pop(b.name, None)
            self._bytes.pop(b.name, None)
            self._counters["sessions_expired"] += 1
            self._counters["sleep_expired"] += len(b.outbox)
            self._forget(b, "asleep %.0f s, %.0f s past its expiry" % (
                now - b.asleep_since if b.asleep_since is not None else 0.0,
                now - b.wake_due - self.expiry_s))
        return len(ended)

    def forgotten(self, b: BoardState) -> None:
        """b left the hub's table another way (evicted): its session goes with it."""
        self._asleep.pop(b.name, None)
        self._bytes.pop(b.name, None)
