"""The BEP 5 routing table: k-buckets over the 160-bit XOR metric, split at the home
bucket (the one that covers our own id).

Bucket i < n-1 holds nodes whose id shares exactly i leading bits with ours; the last
bucket (home) holds the rest. The same class serves BEP 50's topic tables: K = 1 for every
bucket except the home bucket and its sibling (bucket n-2), which keep `home_k` nodes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

ID_BITS = 160
K = 8
QUESTIONABLE_S = 15 * 60.0  # BEP 5: a node not heard from in 15 minutes is questionable
MAX_FAILS = 2  # failed queries in a row before a node is bad and can be replaced

Addr = tuple[str, int]


def random_id() -> bytes:
    return os.urandom(20)


def distance(a: bytes, b: bytes) -> int:
    """XOR distance of two 20-byte ids, as an integer."""
    return int.from_bytes(a, "big") ^ int.from_bytes(b, "big")


def common_prefix_bits(a: bytes, b: bytes) -> int:
    d = distance(a, b)
    return ID_BITS if d == 0 else ID_BITS - d.bit_length()


class NodeInfo:
    __slots__ = ("id", "addr", "last_seen", "fails")

    def __init__(self, nid: bytes, addr: Addr) -> None:
        self.id = nid
        self.addr = addr
        self.last_seen = time.monotonic()
        self.fails = 0

    def is_bad(self, now: float) -> bool:
        return self.fails >= MAX_FAILS or now - self.last_seen > 4 * QUESTIONABLE_S

    def __repr__(self) -> str:
        return "NodeInfo(%s, %s:%d)" % (self.id.hex()[:8], self.addr[0], self.addr[1])


class RoutingTable:
    """k-buckets for `own_id`. `k` is the ordinary bucket size; `home_k` (default k) the size
    of the home bucket and its sibling."""

    def __init__(self, own_id: bytes, *, k: int = K, home_k: int | None = None) -> None:
        if len(own_id) != 20:
            raise ValueError("node ids are 20 bytes")
        self.own_id = own_id
        self.k = k
        self.home_k = max(home_k if home_k is not None else k, k)
        self.buckets: list[list[NodeInfo]] = [[]]
        self.by_addr: dict[Addr, NodeInfo] = {}
        self.counters = {"added": 0, "full": 0, "replaced": 0, "removed": 0}

    def __len__(self) -> int:
        return len(self.by_addr)

    def capacity(self, index: int) -> int:
        return self.home_k if index >= len(self.buckets) - 2 else self.k

    def _index(self, nid: bytes) -> int:
        return min(common_prefix_bits(self.own_id, nid), len(self.buckets) - 1)

    def heard_from(self, nid: bytes, addr: Addr) -> bool:
        """Record that node nid answered or queried from addr; True if it is in the table."""
        if nid == self.own_id:
            return False
        known = self.by_addr.get(addr)
        if known is not None:
            if known.id == nid:
                known.last_seen = time.monotonic()
                known.fails = 0
                return True
            self.remove(addr)  # the address now speaks for another id
        return self._insert(NodeInfo(nid, addr))

    def _insert(self, node: NodeInfo) -> bool:
        while True:
            i = self._index(node.id)
            bucket = self.buckets[i]
            for n in bucket:
                if n.id == node.id:  # same id at a new address: keep the first (BEP 5)
                    return False
            if len(bucket) < self.capacity(i):
                bucket.append(node)
                self.by_addr[node.addr] = node
                self.counters["added"] += 1
                return True
            if i == len(self.buckets) - 1 and len(self.buckets) < ID_BITS:
                self._split()
                continue
            now = time.monotonic()
            for j, n in enumerate(bucket):
                if n.is_bad(now):
                    del self.by_addr[n.addr]
                    bucket[j] = node
                    self.by_addr[node.addr] = node
                    self.counters["replaced"] += 1
                    return True
            self.counters["full"] += 1
            return False

    def _split(self) -> None:
        home = self.buckets[-1]
        depth = len(self.buckets) - 1
        stay = [n for n in home if common_prefix_bits(self.own_id, n.id) > depth]
        move = [n for n in home if common_prefix_bits(self.own_id, n.id) <= depth]
        self.buckets[-1] = move
        self.buckets.append(stay)
        # the old sibling is now an uncle: shrink it to k, keeping the freshest nodes
        if len(self.buckets) >= 3:
            uncle_i = len(self.buckets) - 3
            uncle = self.buckets[uncle_i]
            if len(uncle) > self.k:
                uncle.sort(key=lambda n: -n.last_seen)
                for n in uncle[self.k:]:
                    self.by_addr.pop(n.addr, None)
                    self.counters["removed"] += 1
                del uncle[self.k:]

    def failed(self, addr: Addr) -> None:
        """A query to addr timed out; bad nodes are replaced by newcomers."""
        n = self.by_addr.get(addr)
        if n is not None:
            n.fails += 1

    def remove(self, addr: Addr) -> None:
        n = self.by_addr.pop(addr, None)
        if n is None:
            return
        for b in self.buckets:
            if n in b:
                b.remove(n)
                self.counters["removed"] += 1
                return

    def nodes(self) -> list[NodeInfo]:
        return [n for b in self.buckets for n in b]

    def closest(self, target: bytes, count: int = K,
                exclude: Iterable[Addr] = ()) -> list[NodeInfo]:
        """The `count` good nodes nearest to target by XOR distance."""
        skip = set(exclude)
        now = time.monotonic()
        t = int.from_bytes(target, "big")
        cand = [n for n in self.by_addr.values() if n.addr not in skip and not n.is_bad(now)]
        cand.sort(key=lambda n: int.from_bytes(n.id, "big") ^ t)
        return cand[:count]
