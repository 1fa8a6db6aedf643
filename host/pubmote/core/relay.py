"""The hub's one fan-out: every message that reaches the hub, from a board, an NDN app, an
SP publisher, the mesh or the DHT, goes to the publish hooks, then every listener (SP PUB
clients, the journal, the view) and every board whose nanomsg-style filters match
`<topic URI>|<payload>`; each board's queue drops its oldest when full, journaled (a
sleeping board's queue is held in its own bounds: sleepers.py)."""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterable

from pubmote.core.acks import AckGate
from pubmote.core.filter_index import FilterIndex
from pubmote.core.messages import Listener, Message
from pubmote.core.records import JournalFeed
from pubmote.core.registry import BoardState
from pubmote.core.sleepers import SleepSessions
from pubmote.core.tasks import count_fault
from pubmote.core.topic_table import TopicTable

log = logging.getLogger("pubmote.hub")


class Relay:
    """Fans messages out to listeners and to the subscribers of the tables it is given
    (the hub's boards and NDN app subscriptions, read, never changed here)."""

    def __init__(self, *, boards: dict[str, BoardState], app_subs: dict[int, BoardState],
                 topics: TopicTable, counters: dict[str, int], feed: JournalFeed,
                 gate: AckGate, sleepers: SleepSessions) -> None:
        self._boards = boards
        self._app_subs = app_subs
        self._topics = topics
        self._counters = counters
        self._feed = feed
        self._gate = gate
        self._sleepers = sleepers
        self._listeners: list[Listener] = []
        # see every message before fan-out; a hook returning True has taken it over
        # (directed messages: the mesh relay routes them itself)
        self._hooks: list[Callable[[Message], bool]] = []
        self._index: FilterIndex | None = None  # every subscriber's filters
        self._index_key: tuple[int, int, int] = (0, 0, 0)

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def has_listener(self, fn: Listener) -> bool:
        return fn in self._listeners

    def add_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        self._hooks.append(fn)

    def remove_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        with contextlib.suppress(ValueError):
            self._hooks.remove(fn)

    def reindex(self) -> None:
        """Rebuild the filter index on the next message (a board was removed)."""
        self._index = None

    def publish(self, msg: Message, boards: Iterable[str] | None = None, *,
                listeners: bool = True) -> None:
        """Relay one message to every listener and every board whose filters match.

        With `boards` (names), to exactly those boards instead (a directed message), and to
        listeners and NDN apps only if `listeners`; publish hooks are skipped then.
        Once the intake gate is closed, refused and counted."""
        if not self._gate.open:
            self._counters["refused_stopping"] += 1
            return
        if boards is None and self._hooks and self._hooked(msg):
            return
        self._counters["messages"] += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("message %s from %s via %s (%d B)", msg.topic.decode(errors="replace"),
                      msg.origin, msg.ingress, len(msg.payload))
        self._topics.note(msg)
        if self._feed.journal is not None:
            self._feed.outcome(msg, None, "relayed")
        if boards is not None:
            for name in boards:
                self.deliver(name, msg)
        if not listeners:
            return
        for listener in self._listeners:
            try:
                listener(msg)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the relay
                count_fault(self._counters, "listener_errors", "listener")
        line = msg.line()
        if boards is not None:
            for b in self._app_subs.values():
                if b.filter.matches(line):
                    self.enqueue(b, msg)
            return
        for b in self._subscribers().match(line):
            self.enqueue(b, msg)

    def _hooked(self, msg: Message) -> bool:
        """Whether a publish hook took msg (it is relayed no further then)."""
        for hook in self._hooks:
            try:
                if hook(msg):
                    return True
            except Exception:  # noqa: BLE001 - a broken hook must not stop the relay
                count_fault(self._counters, "hook_errors", "publish hook")
        return False

    def _subscribers(self) -> FilterIndex:
        # every subscriber's filters, indexed; rebuilt when a subscriber or filter has
        # changed since (boards are removed only through reindex, app subscriptions are)
        index = self._index
        key = (BoardState.generation, len(self._boards), len(self._app_subs))
        if index is None or key != self._index_key:
            index = self._index = FilterIndex(itertools.chain(self._boards.values(),
                                                              self._app_subs.values()))
            self._index_key = key
        return index

    def deliver(self, board: str, msg: Message) -> bool:
        """Queue msg for one board (as any relayed message: a full queue drops its oldest,
        counted and journaled); False if no board has that name."""
        b = self._boards.get(board)
        if b is None:
            return False
        self.enqueue(b, msg)
        return True

    def enqueue(self, b: BoardState, msg: Message) -> None:
        if b.asleep_since is not None:  # held for its wake, in the sleep bounds
            self._sleepers.admit(b, msg)
            return
        dropped = b.enqueue(msg)  # a full outbox drops its oldest message: journaled
        if dropped is not None:
            self._feed.outcome(dropped, b.name, "dropped")
