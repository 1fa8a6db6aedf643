"""What the router keeps per peer (its streams, outbound queue, topics, score), the
message cache that IHAVE gossip and IWANT answers come from, and the seen cache."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque

from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import FLOODSUB
from pubmote.p2p.pubsub.rpc import Message
from pubmote.p2p.yamux import Stream


class Score:
    __slots__ = ("invalid", "behaviour", "last_seen")

    def __init__(self) -> None:
        self.invalid = 0.0
        self.behaviour = 0.0
        self.last_seen = time.monotonic()


class PeerState:
    """What we know about one pubsub peer and its outbound queue."""

    def __init__(self, peer_id: PeerId) -> None:
        self.peer_id = peer_id
        self.protocol = ""                  # negotiated on our outbound stream
        self.inbound_protocol = ""
        self.stream: Stream | None = None
        self.inbound: Stream | None = None
        self.queue: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.writer: asyncio.Task[None] | None = None
        self.topics: set[str] = set()
        self.dont_send: OrderedDict[bytes, int] = OrderedDict()
        self.ihave_seen = 0                 # IHAVEs this heartbeat
        self.iwant_asked = 0                # ids we asked it for this heartbeat
        self.throttled = 0
        self.closed = False

    @property
    def proto(self) -> str:
        return self.protocol or self.inbound_protocol

    @property
    def is_gossip(self) -> bool:
        return self.proto.startswith("/meshsub/")

    @property
    def is_flood(self) -> bool:
        return self.proto == FLOODSUB


class MessageCache:
    """The message cache: `length` windows of ids; gossip about the newest `gossip`."""

    def __init__(self, length: int, gossip: int) -> None:
        self.gossip = gossip
        self.windows: deque[list[tuple[bytes, str]]] = deque([[] for _ in range(length)],
                                                              maxlen=length)
        self.msgs: dict[bytes, Message] = {}
        self.sent: dict[bytes, dict[PeerId, int]] = {}

    def put(self, mid: bytes, msg: Message) -> None:
        if mid in self.msgs:
            return
        self.msgs[mid] = msg
        self.windows[0].append((mid, msg.topic))

    def get(self, mid: bytes) -> Message | None:
        return self.msgs.get(mid)

    def count_sent(self, mid: bytes, peer: PeerId) -> int:
        per = self.sent.setdefault(mid, {})
        per[peer] = per.get(peer, 0) + 1
        return per[peer]

    def gossip_ids(self) -> dict[str, list[bytes]]:
        out: dict[str, list[bytes]] = {}
        for i, window in enumerate(self.windows):
            if i >= self.gossip:
                break
            for mid, topic in window:
                out.setdefault(topic, []).append(mid)
        return out

    def shift(self) -> None:
        last = self.windows[-1]
        for mid, _t in last:
            self.msgs.pop(mid, None)
            self.sent.pop(mid, None)
        self.windows.appendleft([])


class SeenCache:
    """Message ids seen lately, oldest first: bounded by max_seen (evictions counted in
    counters["seen_evicted"]) and forgotten after seen_ttl_s."""

    def __init__(self, max_seen: int, ttl_s: float, counters: dict[str, int]) -> None:
        self._max = max_seen
        self._ttl_s = ttl_s
        self._counters = counters
        self._seen: OrderedDict[bytes, float] = OrderedDict()

    def __contains__(self, mid: bytes) -> bool:
        return mid in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def mark(self, mid: bytes) -> None:
        self._seen[mid] = time.monotonic()
        if len(self._seen) > self._max:
            self._seen.popitem(last=False)
            self._counters["seen_evicted"] += 1

    def expire(self, now: float) -> None:
        horizon = now - self._ttl_s
        seen = self._seen
        while seen:
            _mid, t = next(iter(seen.items()))
            if t > horizon:
                break
            seen.popitem(last=False)
