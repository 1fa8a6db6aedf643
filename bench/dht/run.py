"""DHT benchmark: put-to-delivery time over a simulated 50-node BEP 50 topic overlay on
127.x loopback addresses (p50/p99/max over every member of every put, delivery ratio,
messages and bytes sent per node per put). Beside it, in the same run and on the same
network, the named peer: libtorrent reading the same item with dht_get_mutable_item (the
BEP 44 way, polling), timed from the put to its answer."""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "host"))

from pubmote.dht import bep44  # noqa: E402
from pubmote.dht.simnet import SimNet  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def libtorrent_read(ses: Any, lt: Any, key: bytes, salt: bytes, seq: int,
                          timeout_s: float = 10.0) -> tuple[float, float] | None:
    """Milliseconds until libtorrent's dht_get_mutable_item first reports seq, and until
    its lookup completes (the authoritative alert); None if it never reports seq."""
    t0 = time.perf_counter()
    first: float | None = None
    ses.dht_get_mutable_item(key, salt)
    while time.perf_counter() - t0 < timeout_s:
        for a in ses.pop_alerts():
            if isinstance(a, lt.dht_mutable_item_alert) and a.seq >= seq:
                now = (time.perf_counter() - t0) * 1000
                first = now if first is None else first
                if a.authoritative:
                    return first, now
        await asyncio.sleep(0.002)
    return None


async def bench(nodes: int, rounds: int, seed: int) -> int:
    rng = random.Random(seed)
    t_build = time.perf_counter()
    async with SimNet(nodes, subnet=90, query_timeout_s=0.5, seed=seed) as net:
        kp = bep44.KeyPair.generate()
        salt = b"/bench/topic"
        await net.join_topic(kp.public, salt)
        build_s = time.perf_counter() - t_build
        sizes = net.table_sizes()
        ses: Any = None
        lt: Any = None
        try:
            import libtorrent as lt

            ses = lt.session({
                "listen_interfaces": "127.0.0.1:0", "enable_dht": True, "enable_lsd": False,
                "enable_upnp": False, "enable_natpmp": False, "dht_bootstrap_nodes": "",
                "dht_restrict_routing_ips": False, "dht_restrict_search_ips": False,
                "dht_enforce_node_id": False,
                "alert_mask": lt.alert.category_t.dht_notification})
            for n in net.nodes[:8]:
                ses.add_dht_node(n.addr)
            await asyncio.sleep(1.0)
        except ImportError:
            print("libtorrent not installed: no comparison (make setup installs it)")
        times: list[float] = []
        ratios: list[float] = []
        msgs: list[float] = []
        nbytes: list[float] = []
        lt_ms: list[float] = []
        lt_done_ms: list[float] = []
        lt_missed = 0
        for seq in range(1, rounds + 1):
            publisher = rng.randrange(nodes)
            item = bep44.sign_item(kp, b"reading %d" % seq, seq, salt)
            r = await net.publish(publisher, item)
            times.extend(r["times_ms"])
            ratios.append(r["ratio"])
            msgs.append(r["msgs_per_node"])
            nbytes.append(r["bytes_per_node"])
            if ses is not None:
                # the item is on the overlay's nodes; a BEP 44 put makes it findable by
                # any DHT client at the k nodes nearest its target
                await net.nodes[publisher].put_mutable(item)
                got = await libtorrent_read(ses, lt, kp.public, salt, seq)
                if got is None:
                    lt_missed += 1
                else:
                    lt_ms.append(got[0])
                    lt_done_ms.append(got[1])
        members = nodes - 1
        delivered = sum(round(x * members) for x in ratios)
        print("DHT overlay benchmark: %d nodes on 127.x, one BEP 50 topic, %d puts" % (
            nodes, rounds))
        print("  setup: %.1f s (bootstrap + joins); topic tables %d..%d nodes (median %d)" % (
            build_s, min(sizes), max(sizes), statistics.median(sizes)))
        print("  delivery ratio       %d/%d = %.4f" % (delivered, members * rounds,
                                                      delivered / (members * rounds)))
        print("  put-to-delivery      p50 %.1f ms   p99 %.1f ms   max %.1f ms" % (
            pct(times, 0.5), pct(times, 0.99), max(times)))
        print("  traffic per node/put %.1f messages, %.0f bytes sent (mean)" % (
            statistics.mean(msgs), statistics.mean(nbytes)))
        if lt_ms:
            print("  libtorrent 2.1 reading the item (dht_get_mutable_item, BEP 44): first "
                  "answer p50 %.1f ms, lookup done p50 %.1f ms, max %.1f ms (%d missed)" % (
                      pct(lt_ms, 0.5), pct(lt_done_ms, 0.5), max(lt_done_ms), lt_missed))
            print("  ratio: BEP 50 reaches all %d members in %.2fx the time of one libtorrent "
                  "lookup for one reader (p50); a BEP 44 reader learns of a new value only "
                  "when it polls, on average half its poll period late" % (
                      members, pct(times, 0.5) / pct(lt_done_ms, 0.5)))
        print("  (all %d nodes share one Python process and one core: the tail is CPU "
              "queueing of ~%d messages per put)" % (nodes, statistics.mean(msgs) * nodes))
        if ses is not None:
            del ses
        return 0 if delivered == members * rounds else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    return asyncio.run(bench(a.nodes, a.rounds, a.seed))


if __name__ == "__main__":
    sys.exit(main())
