"""The announce store: which peers announced themselves (announce_peer) for each
info-hash, bounded in hashes and in peers per hash, answered to get_peers."""

from __future__ import annotations

import random
import time
from collections import OrderedDict

from pubmote.dht.krpc import Addr

MAX_PEERS_PER_HASH = 100
MAX_VALUES_REPLY = 50  # peers per get_peers answer: fits in one datagram


class PeerStore:
    """announce_peer results: peers by info-hash, bounded in hashes and peers per hash."""

    def __init__(self, max_hashes: int = 1000) -> None:
        self.max_hashes = max_hashes
        self.peers: OrderedDict[bytes, OrderedDict[Addr, float]] = OrderedDict()
        self.counters = {"announced": 0, "evicted": 0}

    def add(self, info_hash: bytes, addr: Addr) -> None:
        d = self.peers.get(info_hash)
        if d is None:
            if len(self.peers) >= self.max_hashes:
                self.peers.popitem(last=False)
                self.counters["evicted"] += 1
            d = self.peers[info_hash] = OrderedDict()
        self.peers.move_to_end(info_hash)
        d[addr] = time.monotonic()
        d.move_to_end(addr)
        while len(d) > MAX_PEERS_PER_HASH:
            d.popitem(last=False)
            self.counters["evicted"] += 1
        self.counters["announced"] += 1

    def get(self, info_hash: bytes, limit: int = MAX_VALUES_REPLY) -> list[Addr]:
        d = self.peers.get(info_hash)
        if not d:
            return []
        addrs = list(d)
        return addrs if len(addrs) <= limit else random.sample(addrs, limit)
