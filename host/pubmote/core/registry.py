"""What the hub knows of each subscriber (a board, or an NDN app's PubSub subscription):
its face, filters, counters and bounded delivery queue; and the read-only snapshot of a
board that the hub hands to everyone else (the mesh relay, retained topics, the view)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, ClassVar, Protocol

from pubmote.core.messages import Message
from pubmote_wire.subfilter import SubFilter


class HubFace(Protocol):
    """What the hub needs of any face: board links and NDN application connections."""

    face_id: int
    label: str
    kind: str
    up: bool
    board: str | None
    tracer: Any

    def send_packet(self, pkt: bytes) -> None: ...

    def bad_frames(self) -> int: ...


class BoardState:
    """What the hub knows of one board, keyed by the name it registered with."""

    # bumped by every set_filters of any subscriber: the hub's filter index is rebuilt
    # when it changes (filter_index.py)
    generation: ClassVar[int] = 0

    def __init__(self, name: str, prefix: bytes, face: HubFace, queue_len: int) -> None:
        self.name = name
        self.prefix = prefix
        self.face = face
        self.filter = SubFilter()
        self.filters: list[bytes] = []
        self.registered_at = time.time()
        self.last_seen = time.time()
        self.registrations = 0
        self.down = False  # its face went down; its next registration is a reconnect
        self.down_since = 0.0  # time.monotonic() when it went down: the longest down goes
        self.routes: list[bytes] = []  # the FIB prefixes it registered (its own, served)
        self.batch = 0  # its link batch form, 0: none (docs/protocols/link-batch.md)
        self.boot: int | None = None  # drawn by the board at start-up: new after a restart
        # set while the board sleeps (sleepers.py): when it said so, and when it is due back
        # (the sleep sessions' clock, time.time by default)
        self.asleep_since: float | None = None
        self.wake_due = 0.0
        self.sleeper = False  # it has announced a sleep: a sleeping board, awake or not
        self.heard_s = time.monotonic()  # when a packet of its last came in on its face
        self.outbox: deque[Message] = deque()
        self.queue_len = queue_len
        self.wake = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        self.counters = {"published": 0, "delivered": 0, "dropped": 0, "fetch_failed": 0,
                         "deliver_failed": 0, "duplicates": 0}

    def set_filters(self, filters: list[bytes]) -> None:
        f = SubFilter()
        for p in filters:
            f.subscribe(p)
        self.filter = f
        self.filters = list(filters)
        BoardState.generation += 1

    def enqueue(self, msg: Message) -> Message | None:
        """Queue msg for delivery; return the message dropped to make room, if any."""
        dropped = None
        if len(self.outbox) >= self.queue_len:
            dropped = self.outbox.popleft()
            self.counters["dropped"] += 1
        self.outbox.append(msg)
        self.wake.set()
        return dropped

    def info(self) -> BoardInfo:
        """A read-only snapshot of this board."""
        return BoardInfo(self)


class BoardInfo:
    """A board as the hub's users see it: a copy, taken when asked for; `matches` uses the
    board's filters as they were then."""

    __slots__ = ("name", "face_id", "face_label", "face_kind", "up", "filters", "counters",
                 "registered_at", "last_seen", "registrations", "boot", "asleep",
                 "wake_due", "_filter")

    def __init__(self, b: BoardState) -> None:
        self.name = b.name
        self.face_id = b.face.face_id
        self.face_label = b.face.label
        self.face_kind = b.face.kind
        # asleep: its session is kept (docs/protocols/sleep.md), due back at wake_due
        self.asleep = b.asleep_since is not None
        self.wake_due = b.wake_due if self.asleep else None
        self.up = b.face.up and not b.down and not self.asleep
        self.filters = tuple(b.filters)
        self.counters = dict(b.counters)
        self.registered_at = b.registered_at
        self.last_seen = b.last_seen
        self.registrations = b.registrations
        self.boot = b.boot
        self._filter = b.filter  # replaced, never changed, when the filters change

    def matches(self, line: bytes) -> bool:
        """Whether the board's filters take `<topic URI>|<payload>`."""
        return bool(self._filter.matches(line))
