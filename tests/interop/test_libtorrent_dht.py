"""Interop with libtorrent 2.1 (PyPI `libtorrent`) on a loopback DHT: our BEP 44 put is
read by libtorrent's dht_get_mutable_item, libtorrent's put is read by us, libtorrent's
queries to our node are answered (its lookups finish in milliseconds, not after its
timeouts), and libtorrent answers every query our node sends.

libtorrent 2.x sends get_peers where older DHTs sent find_node (bootstrap and refresh)
and pings only nodes of full buckets, so find_node and ping are proven the other way
round here (our queries, its answers) and against our own node in tests/host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import libtorrent as lt

from pubmote.dht import bep44, krpc
from pubmote.dht.node import DhtNode

TIMEOUT_S = 30


def _session() -> Any:
    return lt.session({
        "listen_interfaces": "127.0.0.1:0", "enable_dht": True, "enable_lsd": False,
        "enable_upnp": False, "enable_natpmp": False, "dht_bootstrap_nodes": "",
        # a private loopback DHT: several nodes on one IP, no BEP 42 id checks
        "dht_restrict_routing_ips": False, "dht_restrict_search_ips": False,
        "dht_enforce_node_id": False,
        "alert_mask": lt.alert.category_t.dht_notification
        | lt.alert.category_t.error_notification})


@contextlib.asynccontextmanager
async def lt_and_node() -> AsyncIterator[tuple[Any, DhtNode, tuple[str, int]]]:
    node = DhtNode(host="127.0.0.1", port=0, query_timeout_s=1.0)
    await node.start()
    ses = _session()
    try:
        lt_addr = ("127.0.0.1", int(ses.listen_port()))
        ses.add_dht_node(node.addr)
        assert await node.ping(lt_addr) is not None
        # libtorrent probes the node it was given, and puts it in its routing table once our
        # answer is in: a lookup started before that finds nobody
        await _until(lambda: node.counters["queries_in"] > 0, "libtorrent to contact us")
        deadline = time.monotonic() + 10
        while await _lt_nodes(ses) < 1:
            assert time.monotonic() < deadline, "our node never got into libtorrent's table"
            await asyncio.sleep(0.02)
        yield ses, node, lt_addr
    finally:
        await node.close()
        del ses


async def _lt_nodes(ses: Any) -> int:
    """How many nodes libtorrent's routing table holds (from its DHT stats alert)."""
    ses.post_dht_stats()
    st = await _alert(ses, lt.dht_stats_alert)
    return sum(b["num_nodes"] for b in st["routing_table"])


async def _until(pred: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        await asyncio.sleep(0.02)


async def _alert(ses: Any, kind: type, pred: Callable[[Any], bool] = lambda a: True,
                 timeout_s: float = 10) -> dict[str, Any]:
    """Wait for an alert of kind; its fields are copied at once (alerts die with the
    next pop_alerts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for a in ses.pop_alerts():
            if isinstance(a, kind) and pred(a):
                return {k: getattr(a, k) for k in dir(a)
                        if not k.startswith("_") and not callable(getattr(a, k))}
        await asyncio.sleep(0.01)
    raise AssertionError("no %s within %.0f s" % (kind.__name__, timeout_s))


def run(body: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(body(), TIMEOUT_S))


def test_our_put_is_read_by_libtorrent() -> None:
    async def body() -> None:
        async with lt_and_node() as (ses, node, _):
            kp = bep44.KeyPair.generate()
            item = bep44.sign_item(kp, b"from pubmote", 7, b"room/temp")
            assert await node.put_mutable(item) >= 1
            t0 = time.monotonic()
            ses.dht_get_mutable_item(kp.public, b"room/temp")
            got = await _alert(ses, lt.dht_mutable_item_alert,
                               lambda a: a.seq == 7 and a.authoritative)
            took = time.monotonic() - t0
            assert bytes(got["key"]) == kp.public and got["salt"] == b"room/temp"
            assert got["item"] == b"from pubmote" and bytes(got["signature"]) == item.sig
            # a lookup that waits on a query nobody answers takes about 15 s
            assert took < 8.0, "libtorrent's lookup waited on a timeout (%.1f s)" % took
            print("libtorrent read our item in %.0f ms" % (took * 1000))

    run(body)


def test_libtorrent_put_is_read_by_us() -> None:
    async def body() -> None:
        async with lt_and_node() as (ses, node, lt_addr):
            kp = bep44.KeyPair.generate()
            ses.dht_put_mutable_item(kp.expanded, kp.public, b"from libtorrent", b"lt")
            put = await _alert(ses, lt.dht_put_alert)
            assert put["num_success"] >= 1 and put["seq"] == 1
            # through our lookup ...
            got = await node.get_mutable(kp.public, b"lt")
            assert got is not None and got.seq == 1 and got.value() == b"from libtorrent"
            assert got.verify()
            # ... and straight from libtorrent's own storage, signature checked here
            r = await node.query(lt_addr, b"get", {b"target": got.target})
            assert r is not None and r.kind == b"r"
            from_lt = bep44.item_from_fields(r.args, b"lt")
            assert from_lt.sig == got.sig and from_lt.value() == b"from libtorrent"
            # libtorrent's next put (seq 2) replaces ours: seq is monotonic across both
            ses.dht_put_mutable_item(kp.expanded, kp.public, b"second", b"lt")
            await _alert(ses, lt.dht_put_alert, lambda a: a.seq == 2)
            stored = node.store.get_mutable(got.target)
            assert stored is not None and stored.seq == 2 and stored.value() == b"second"

    run(body)


def test_libtorrent_queries_are_answered() -> None:
    async def body() -> None:
        async with lt_and_node() as (ses, node, _):
            ih = os.urandom(20)
            asked = node.methods_in["get_peers"]
            ses.dht_get_peers(lt.sha1_hash(ih))
            await _until(lambda: node.methods_in["get_peers"] > asked, "libtorrent's get_peers")
            ses.dht_announce(lt.sha1_hash(ih), 4242, 0)
            await _until(lambda: ("127.0.0.1", 4242) in node.peer_store.get(ih),
                         "libtorrent's announce_peer")
            kp = bep44.KeyPair.generate()
            ses.dht_put_mutable_item(kp.expanded, kp.public, b"x", b"")
            await _alert(ses, lt.dht_put_alert)
            m = node.methods_in
            assert m["get_peers"] >= 1 and m["announce_peer"] >= 1
            assert m["get"] >= 1 and m["put"] >= 1 and m["other"] == 0
            assert node.counters["errors_sent"] == 0 and node.counters["malformed"] == 0
            print("libtorrent asked us:", {k: v for k, v in m.items() if v})

    run(body)


def test_libtorrent_answers_every_query_we_send() -> None:
    async def body() -> None:
        async with lt_and_node() as (_ses, node, lt_addr):
            assert await node.ping(lt_addr) is not None
            r = await node.query(lt_addr, b"find_node", {b"target": os.urandom(20)})
            assert r is not None and r.kind == b"r"
            assert node.node_id in [nid for nid, _ in krpc.parse_nodes(r.args[b"nodes"])]
            ih = os.urandom(20)
            r = await node.query(lt_addr, b"get_peers", {b"info_hash": ih})
            assert r is not None and r.kind == b"r"
            r = await node.query(lt_addr, b"announce_peer",
                                 {b"info_hash": ih, b"port": 5151, b"token": r.args[b"token"]})
            assert r is not None and r.kind == b"r"
            r = await node.query(lt_addr, b"get_peers", {b"info_hash": ih})
            assert r is not None and krpc.compact_peer(("127.0.0.1", 5151)) in r.args[b"values"]
            kp = bep44.KeyPair.generate()
            item = bep44.sign_item(kp, {b"temp": 21}, 3, b"d")
            r = await node.query(lt_addr, b"get", {b"target": item.target})
            assert r is not None
            tok = r.args[b"token"]
            r = await node.query(lt_addr, b"put", item.put_args(node.node_id, tok))
            assert r is not None and r.kind == b"r"
            # libtorrent gives BEP 44's codes too: stale seq and a bad signature
            old = bep44.sign_item(kp, {b"temp": 20}, 2, b"d")
            r = await node.query(lt_addr, b"put", old.put_args(node.node_id, tok))
            assert r is not None and r.error()[0] == krpc.SEQ_TOO_LOW
            forged = item.put_args(node.node_id, tok)
            forged[b"seq"] = 4
            r = await node.query(lt_addr, b"put", forged)
            assert r is not None and r.error()[0] == krpc.INVALID_SIGNATURE

    run(body)
