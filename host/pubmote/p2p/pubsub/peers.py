"""The router's pubsub peers: each one's state (streams, outbound queue, the topics it
subscribes to) and, by topic, who subscribes; bounded queues whose drops are counted."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import GossipConfig
from pubmote.p2p.pubsub.rpc import RPC, Control, frame
from pubmote.p2p.pubsub.state import PeerState

log = logging.getLogger("pubmote.p2p.pubsub")

_NONE: frozenset[PeerId] = frozenset()


class PeerTable:
    """The peers we have (or are opening) a pubsub stream with, and their subscriptions."""

    def __init__(self, config: GossipConfig, counters: dict[str, int]) -> None:
        self._config = config
        self._counters = counters
        self._peers: dict[PeerId, PeerState] = {}
        self._topics: dict[str, set[PeerId]] = {}       # who subscribes to what

    def __contains__(self, peer: PeerId) -> bool:
        return peer in self._peers

    def __len__(self) -> int:
        return len(self._peers)

    def __iter__(self) -> Iterator[PeerState]:
        return iter(self._peers.values())

    def get(self, peer: PeerId) -> PeerState | None:
        return self._peers.get(peer)

    def add(self, ps: PeerState) -> None:
        self._peers[ps.peer_id] = ps

    def pop(self, peer: PeerId) -> PeerState | None:
        """Forget peer and its subscriptions; its state, if it had one."""
        ps = self._peers.pop(peer, None)
        if ps is not None:
            for t in ps.topics:
                self._leave(t, peer)
        return ps

    def subscribers(self, topic: str) -> frozenset[PeerId] | set[PeerId]:
        """Who subscribes to topic (read it, do not change it)."""
        return self._topics.get(topic, _NONE)

    def subscribe(self, ps: PeerState, topic: str) -> bool:
        """Note that ps subscribes to topic; False if known or over its topic limit."""
        if topic in ps.topics:
            return False
        if len(ps.topics) >= self._config.max_topics_per_peer:
            self._counters["subscription_limit"] += 1
            return False
        ps.topics.add(topic)
        self._topics.setdefault(topic, set()).add(ps.peer_id)
        return True

    def unsubscribe(self, ps: PeerState, topic: str) -> bool:
        """Note that ps left topic; False if it was not subscribed."""
        if topic not in ps.topics:
            return False
        ps.topics.discard(topic)
        self._leave(topic, ps.peer_id)
        return True

    def _leave(self, topic: str, peer: PeerId) -> None:
        members = self._topics.get(topic)
        if members is not None:
            members.discard(peer)
            if not members:
                del self._topics[topic]

    def enqueue(self, ps: PeerState, data: bytes) -> None:
        """Queue one framed RPC for ps (dropped and counted when its queue is full)."""
        if ps.closed:
            return
        if len(ps.queue) >= self._config.max_queue:
            self._counters["dropped_queue_full"] += 1
            return
        ps.queue.append(data)
        ps.wake.set()

    def send_control(self, ps: PeerState, ctl: Control) -> None:
        if not ctl.empty():
            self.enqueue(ps, frame(RPC(control=ctl).encode()))
