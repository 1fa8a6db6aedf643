"""An in-process DHT of N nodes on 127.x loopback addresses, one BEP 50 topic overlay
over all of them, and the measure of a put's delivery: for the tests and `bench/dht`.
"""

from __future__ import annotations

import asyncio
import random
import socket
import statistics
import time
from typing import Any

from pubmote.dht import bep44
from pubmote.dht.bep50 import TopicOverlay
from pubmote.dht.node import DhtNode


def loopback_hosts(n: int, subnet: int = 77) -> list[str]:
    """n distinct 127.<subnet>.x.y addresses, or 127.0.0.1 n times when only that one
    can be bound here (each node then differs by port)."""
    hosts = ["127.%d.%d.%d" % (subnet, 1 + i // 250, 1 + i % 250) for i in range(n)]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((hosts[-1], 0))
    except OSError:
        return ["127.0.0.1"] * n
    return hosts


class SimNet:
    """N DHT nodes bootstrapped from the first; `async with SimNet(50) as net:`."""

    def __init__(self, n: int, *, query_timeout_s: float = 0.5, subnet: int = 77,
                 seed: int | None = None) -> None:
        self.n = n
        self.query_timeout_s = query_timeout_s
        self.subnet = subnet
        self.rng = random.Random(seed)
        self.nodes: list[DhtNode] = []
        self.overlays: list[TopicOverlay] = []
        self.delivered: dict[int, tuple[int, float]] = {}  # node index -> (seq, when)

    async def __aenter__(self) -> SimNet:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        hosts = loopback_hosts(self.n, self.subnet)
        # rate limits as on the internet: one source IP per node here
        per_ip = len(set(hosts)) == self.n
        for h in hosts:
            node = DhtNode(host=h, port=0, query_timeout_s=self.query_timeout_s,
                           rate_per_s=50.0 if per_ip else 1e6,
                           rate_burst=100.0 if per_ip else 1e6)
            await node.start()
            self.nodes.append(node)
        first = self.nodes[0].addr
        # each node bootstraps from the first and from one random earlier node
        for i, node in enumerate(self.nodes[1:], 1):
            seeds = [first, self.nodes[self.rng.randrange(i)].addr]
            await node.bootstrap(seeds)
        # a second round fills tables that were small when their node joined
        await asyncio.gather(*(node.bootstrap([]) for node in self.nodes))

    async def join_topic(self, key: bytes, salt: bytes = b"") -> list[TopicOverlay]:
        """Every node joins the topic (key, salt), one after another, as gateways would."""
        for i, node in enumerate(self.nodes):
            ov = TopicOverlay(node, key, salt, on_update=self._recorder(i))
            await ov.join()
            self.overlays.append(ov)
        return self.overlays

    def _recorder(self, i: int) -> Any:
        def on_update(item: bep44.MutableItem) -> None:
            self.delivered[i] = (item.seq, time.perf_counter())
        return on_update

    def traffic(self) -> dict[str, int]:
        tot: dict[str, int] = {"tx_msgs": 0, "tx_bytes": 0, "rx_msgs": 0, "rx_bytes": 0}
        for node in self.nodes:
            for k in tot:
                tot[k] += node.counters[k]
        return tot

    async def publish(self, publisher: int, item: bep44.MutableItem,
                      timeout_s: float = 10.0) -> dict[str, Any]:
        """Publish item from overlay `publisher`; wait until every member has it (or the
        timeout). Returns ratio, per-node delivery times and traffic per node."""
        before = self.traffic()
        t0 = time.perf_counter()
        accepted = await self.overlays[publisher].publish(item)
        deadline = t0 + timeout_s
        others = [i for i in range(self.n) if i != publisher]

        def got(i: int) -> bool:
            d = self.delivered.get(i)
            return d is not None and d[0] >= item.seq

        while not all(got(i) for i in others) and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        # let the last forwards finish so the traffic counts are complete
        await asyncio.sleep(0.2)
        after = self.traffic()
        times_ms = sorted((self.delivered[i][1] - t0) * 1000 for i in others if got(i))
        n_ok = len(times_ms)
        return {
            "members": len(others), "delivered": n_ok, "ratio": n_ok / max(1, len(others)),
            "accepted_by_first_hop": accepted, "times_ms": times_ms,
            "p50_ms": statistics.median(times_ms) if times_ms else None,
            "p99_ms": _pct(times_ms, 0.99), "max_ms": times_ms[-1] if times_ms else None,
            "msgs_per_node": (after["tx_msgs"] - before["tx_msgs"]) / self.n,
            "bytes_per_node": (after["tx_bytes"] - before["tx_bytes"]) / self.n,
        }

    def table_sizes(self) -> list[int]:
        return [len(ov.table) for ov in self.overlays]

    async def close(self) -> None:
        for ov in self.overlays:
            ov.leave()
        await asyncio.gather(*(node.close() for node in self.nodes), return_exceptions=True)


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(q * len(xs)))]
