"""The hub's per-topic statistics (count, rate, last value: what the view shows), bounded:
topics are whatever publishers name, so the table keeps at most `max_topics` and, to make
room for a new one, evicts one not published since the last time eviction passed it (a
CLOCK approximation of least recently published: nothing is done per message for it),
counted."""

from __future__ import annotations

from pubmote.core.limits import LimitHits
from pubmote.core.messages import Message, TopicStats

TOPIC_KEY_MAX = 1024  # longer topics are counted under their first 1 KiB, with "..."


class TopicTable:
    """TopicStats by topic URI, at most max_topics."""

    def __init__(self, max_topics: int, hits: LimitHits) -> None:
        self.max_topics = max_topics
        self.hits = hits
        # insertion order is the clock's order; each value's `mark` is its count when it
        # was inserted or last passed over
        self._stats: dict[bytes, TopicStats] = {}

    def note(self, msg: Message) -> None:
        """Count msg in its topic's statistics."""
        topic = msg.topic
        if len(topic) > TOPIC_KEY_MAX:  # an SP topic may be 64 KiB: its key is bounded
            topic = topic[:TOPIC_KEY_MAX] + b"..."
        stats = self._stats.get(topic)
        if stats is None:
            stats = self._new(topic)
        stats.add(msg)

    def _new(self, topic: bytes) -> TopicStats:
        table = self._stats
        if len(table) >= self.max_topics:
            while True:  # ends within one pass: each passed-over topic is marked
                old_topic = next(iter(table))
                old = table.pop(old_topic)
                if old.count == old.mark:
                    break
                old.mark = old.count  # published since: a second chance, at the back
                table[old_topic] = old
            self.hits.hit("max_topics", "the figures of %r evicted", old_topic[:60])
        stats = table[topic] = TopicStats()
        stats.mark = 1  # its first message, counted next
        return stats

    def get(self, topic: bytes) -> TopicStats | None:
        return self._stats.get(topic)

    def snapshot(self) -> dict[bytes, TopicStats]:
        return dict(self._stats)

    def __len__(self) -> int:
        return len(self._stats)
