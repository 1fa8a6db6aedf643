"""The hub's per-topic statistics (count, rate, last value: what the view shows), bounded:
topics are whatever publishers name, so the table keeps the `max_topics` most recently
published and evicts the least recently published one to make room, counted."""

from __future__ import annotations

from collections import OrderedDict

from pubmote.core.limits import LimitHits
from pubmote.core.messages import Message, TopicStats


class TopicTable:
    """TopicStats by topic URI, least recently published first; at most max_topics."""

    def __init__(self, max_topics: int, hits: LimitHits) -> None:
        self.max_topics = max_topics
        self.hits = hits
        self.evicted = 0
        self._stats: OrderedDict[bytes, TopicStats] = OrderedDict()

    def note(self, msg: Message) -> None:
        """Count msg in its topic's statistics."""
        table = self._stats
        stats = table.get(msg.topic)
        if stats is None:
            if len(table) >= self.max_topics:
                table.popitem(last=False)
                self.evicted += 1
                self.hits.hit("max_topics", "the least recently published topic's figures "
                              "evicted")
            stats = table[msg.topic] = TopicStats()
        else:
            table.move_to_end(msg.topic)
        stats.add(msg)

    def get(self, topic: bytes) -> TopicStats | None:
        return self._stats.get(topic)

    def snapshot(self) -> dict[bytes, TopicStats]:
        return dict(self._stats)

    def __len__(self) -> int:
        return len(self._stats)
