"""The GossipSub router between pubmote hosts on 127.0.0.1: mesh degree bounds, GRAFT/PRUNE
backoff, IHAVE/IWANT recovery and broken promises, the seen cache, signatures and scoring,
validators, bounded queues, malformed RPCs, floodsub peers, fanout and IDONTWANT."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from mesh_util import addr_of, make_host

from pubmote.p2p import KeyPair
from pubmote.p2p.errors import StreamReset
from pubmote.p2p.pubsub.router import (
    FLOODSUB,
    GossipConfig,
    GossipMessage,
    GossipSub,
    PublishRejected,
)
from pubmote.p2p.pubsub.rpc import RPC, SIGN_PREFIX, Control, Message, frame

T = "/test/cat/topic"
FAST: dict[str, Any] = {"heartbeat_s": 0.1, "heartbeat_initial_delay_s": 0.05}


def run(coro: Coroutine[Any, Any, None], timeout_s: float = 60.0) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout_s))


async def settle(cond: Callable[[], bool], timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not cond():
        assert loop.time() - t0 < timeout_s, "condition not met"
        await asyncio.sleep(0.02)


async def heartbeats(routers: list[GossipSub], n: int = 2) -> None:
    """Wait until each router ran n more heartbeats: the time a check that something does
    not happen gives it (mesh upkeep, gossip and backoffs all run on heartbeats)."""
    start = [g.heartbeats for g in routers]
    await settle(lambda: all(g.heartbeats >= s + n for g, s in zip(routers, start,
                                                                     strict=True)))


class Node:
    """A host, its router and what its subscriber got."""

    def __init__(self, gs: GossipSub) -> None:
        self.gs = gs
        self.got: list[GossipMessage] = []

    @property
    def id(self) -> Any:
        return self.gs.peer_id

    def sub(self, topic: str = T) -> None:
        self.gs.subscribe(topic, self.got.append)

    def data(self) -> list[bytes]:
        return [m.data for m in self.got]

    def inject(self, to: Node, raw_rpc: bytes) -> None:
        """Send an RPC as is (to break the rules on purpose)."""
        self.gs._peers.enqueue(self.gs._peers.get(to.id), frame(raw_rpc))


async def start(n: int, **cfg: Any) -> list[Node]:
    out = []
    for _ in range(n):
        h = make_host()
        await h.start()
        gs = GossipSub(h, GossipConfig(**{**FAST, **cfg}))
        await gs.start()
        out.append(Node(gs))
    return out


async def stop(nodes: list[Node]) -> None:
    for n in nodes:
        await n.gs.stop()
        await n.gs.host.close()


async def link(a: Node, b: Node, topic: str | None = T) -> None:
    await a.gs.host.connect(addr_of(b.gs.host))
    await settle(lambda: b.id in a.gs.peers() and a.id in b.gs.peers())
    if topic is not None:
        # each knows the other's subscription to `topic`, where there is one
        await settle(lambda: (b.id in a.gs.peers(topic) or topic not in b.gs.subscriptions())
                     and (a.id in b.gs.peers(topic) or topic not in a.gs.subscriptions()))


def meshed(a: Node, b: Node) -> bool:
    """a and b are each in the other's mesh for T, and every GRAFT sent has been taken."""
    return (a.gs.mesh_peers(T) == [b.id] and b.gs.mesh_peers(T) == [a.id]
            and a.gs.counters["graft_sent"] == b.gs.counters["graft_received"]
            and b.gs.counters["graft_sent"] == a.gs.counters["graft_received"])


async def triangle(nodes: list[Node]) -> None:
    """Three nodes subscribed to T, each linked to the others, each in the others' mesh."""
    for n in nodes:
        n.sub()
    a, b, c = nodes
    await link(a, b)
    await link(b, c)
    await link(a, c)
    await settle(lambda: all(len(n.gs.mesh_peers(T)) == 2 for n in nodes))


def forged(origin: KeyPair, topic: str, data: bytes, seqno: bytes, *,
           signer: KeyPair | None = None, key: bytes | None = None,
           sign: bool = True) -> Message:
    m = Message(from_=origin.peer_id.raw, data=data, seqno=seqno, topic=topic)
    if sign:
        m.signature = (signer or origin).sign(SIGN_PREFIX + m.unsigned_bytes())
    m.key = key
    m.raw = m.encode()
    return m


def test_mesh_degree_stays_within_bounds() -> None:
    async def go() -> None:
        nodes = await start(10, D=3, D_low=2, D_high=4, D_score=2, seed=1,
                            prune_backoff_s=2.0)
        try:
            for n in nodes:
                n.sub()
            # Each node dials about half of the others: a full mesh takes a GRAFT only over
            # a connection it opened, so a node that dialled everyone (or no one) could be
            # refused by every full mesh. A short backoff lets a refused node try again.
            for i, a in enumerate(nodes):
                for j in range(i + 1, len(nodes)):
                    dialer, target = (a, nodes[j]) if (j - i) % 2 else (nodes[j], a)
                    await dialer.gs.host.connect(addr_of(target.gs.host))
            await settle(lambda: all(len(n.gs.peers(T)) == 9 for n in nodes))
            await settle(lambda: all(2 <= len(n.gs.mesh_peers(T)) <= 4 for n in nodes))
            for _ in range(5):  # and it stays so over heartbeats
                await heartbeats([n.gs for n in nodes], 1)
                assert all(len(n.gs.mesh_peers(T)) <= 4 for n in nodes)
            await settle(lambda: all(2 <= len(n.gs.mesh_peers(T)) <= 4 for n in nodes))
            # The mesh is symmetric once settled: if a has b, b has a.
            await settle(lambda: all(n.id in m.gs.mesh_peers(T) for n in nodes
                                     for m in nodes if m.id in n.gs.mesh_peers(T)))
            await nodes[0].gs.publish(T, b"to all")
            await settle(lambda: all(n.data() == [b"to all"] for n in nodes[1:]))
            assert nodes[0].got == []  # no local delivery of our own message
        finally:
            await stop(nodes)
    run(go())


def test_chain_relays_in_order_and_once() -> None:
    async def go() -> None:
        nodes = await start(4)
        try:
            for n in nodes:
                n.sub()
            for a, b in itertools.pairwise(nodes):
                await link(a, b)
            await settle(lambda: all(n.gs.mesh_peers(T) for n in nodes))
            sent = [b"m%d" % i for i in range(50)]
            ids = [await nodes[0].gs.publish(T, d) for d in sent]
            await settle(lambda: all(len(n.got) == 50 for n in nodes[1:]))
            await heartbeats([n.gs for n in nodes])
            for n in nodes[1:]:
                assert n.data() == sent
                assert [m.msg_id for m in n.got] == ids
                assert all(m.from_peer == nodes[0].id for m in n.got)
            last = nodes[3].got[0]
            assert last.received_from == nodes[2].id
            assert ids[0] == nodes[0].id.raw + last.seqno  # default id: from + seqno
        finally:
            await stop(nodes)
    run(go())


def test_seen_cache_dedupes_and_expires() -> None:
    async def go() -> None:
        nodes = await start(3, seen_ttl_s=0.5)
        a, b, c = nodes
        try:
            await triangle(nodes)
            for i in range(20):
                await a.gs.publish(T, b"%d" % i)
            await settle(lambda: len(b.got) == 20 and len(c.got) == 20)
            await heartbeats([n.gs for n in nodes])
            assert len(b.got) == 20 and len(c.got) == 20
            assert b.gs.counters["duplicates"] + c.gs.counters["duplicates"] > 0
            # The same message again: counted as a duplicate, not delivered.
            raw = a.gs._gossip.get(b.got[0].msg_id)
            assert raw is not None
            before = b.gs.counters["duplicates"]
            a.inject(b, RPC(publish=[raw]).encode())
            await settle(lambda: b.gs.counters["duplicates"] == before + 1)
            assert len(b.got) == 20
            # After seen_ttl the cache has forgotten it (bounded by time).
            await settle(lambda: len(b.gs._seen) == 0, 10.0)
        finally:
            await stop(nodes)
    run(go())


def test_seen_cache_and_queue_are_bounded() -> None:
    async def go() -> None:
        nodes = await start(2, max_queue=4, max_seen=10)
        a, b = nodes
        try:
            b.sub()
            await link(a, b)
            for i in range(50):  # no await yields here: the writer cannot drain
                await a.gs.publish(T, b"%d" % i)
            assert len(a.gs._peers.get(b.id).queue) == 4
            assert a.gs.counters["dropped_queue_full"] == 46
            assert len(a.gs._seen) == 10 and a.gs.counters["seen_evicted"] == 40
            await settle(lambda: len(b.got) == 4)
            await heartbeats([a.gs, b.gs])
            assert b.data() == [b"0", b"1", b"2", b"3"]
        finally:
            await stop(nodes)
    run(go())


def test_graft_prune_and_backoff() -> None:
    async def go() -> None:
        # the backoff must outlast the checks made inside it on a loaded machine
        nodes = await start(2, unsubscribe_backoff_s=2.0, prune_backoff_s=5.0)
        a, b = nodes
        try:
            a.sub()
            b.sub()
            await link(a, b)
            # a GRAFT of a's still in flight when b leaves would be answered with a second PRUNE
            await settle(lambda: meshed(a, b))
            # b leaves and comes back: a PRUNE with backoff keeps both apart for a while.
            b.gs.unsubscribe(T)
            await settle(lambda: a.gs.mesh_peers(T) == [])
            assert a.gs.counters["prune_received"] == 1
            b.sub()
            await settle(lambda: b.id in a.gs.peers(T))
            await heartbeats([a.gs, b.gs], 3)  # heartbeats run; the backoff holds
            assert a.gs.mesh_peers(T) == [] and b.gs.mesh_peers(T) == []
            await settle(lambda: a.gs.mesh_peers(T) == [b.id] and b.gs.mesh_peers(T) == [a.id],
                         10.0)
            assert a.gs.score(b.id) == 0.0
            # Now b GRAFTs during a fresh backoff: a refuses, PRUNEs and penalises it.
            b.gs.unsubscribe(T)
            await settle(lambda: a.gs.mesh_peers(T) == [])
            b.sub()
            ctl = Control()
            ctl.graft.append(T)
            b.gs._peers.send_control(b.gs._peers.get(a.id), ctl)
            await settle(lambda: a.gs.score(b.id) < 0)
            assert a.gs.mesh_peers(T) == []
            await settle(lambda: b.gs.counters["prune_received"] >= 1)
            assert b.gs.mesh_peers(T) == []
        finally:
            await stop(nodes)
    run(go())


def test_ihave_iwant_recovers_a_missed_message() -> None:
    async def go() -> None:
        nodes = await start(2, flood_publish=False, prune_backoff_s=30.0)
        a, c = nodes
        try:
            a.sub()
            c.sub()
            await link(a, c)
            # a GRAFT still in flight would arrive inside the backoff set below and be
            # penalised as a flood, and a peer that low gets no gossip
            await settle(lambda: meshed(a, c))
            # Take them out of each other's mesh (as after a PRUNE): only gossip is left.
            for x, y in ((a, c), (c, a)):
                x.gs._mesh.discard(T, y.id)
                x.gs._mesh.add_backoff(T, y.id, 30.0)
            await a.gs.publish(T, b"gossiped")
            assert a.gs.counters["published_no_peers"] == 1
            await settle(lambda: c.data() == [b"gossiped"])
            assert a.gs.counters["ihave_sent"] >= 1 and a.gs.counters["iwant_served"] == 1
            assert c.gs.counters["iwant_sent"] == 1
            assert c.got[0].received_from == a.id
        finally:
            await stop(nodes)
    run(go())


def test_broken_iwant_promise_is_penalised() -> None:
    async def go() -> None:
        nodes = await start(2, iwant_followup_s=0.2)
        a, c = nodes
        try:
            a.sub()
            c.sub()
            await link(a, c)
            ctl = Control()
            ctl.ihave.append((T, [b"never-sent"]))
            a.gs._peers.send_control(a.gs._peers.get(c.id), ctl)
            await settle(lambda: c.gs.counters["broken_promises"] == 1)
            assert c.gs.score(a.id) < 0
            # Below the gossip threshold? Not yet (-10 is the threshold itself): more IHAVEs
            # are still heeded, but a second broken promise drops it below.
            ctl2 = Control()
            ctl2.ihave.append((T, [b"never-sent-2"]))
            a.gs._peers.send_control(a.gs._peers.get(c.id), ctl2)
            await settle(lambda: c.gs.counters["broken_promises"] == 2)
            assert c.gs.score(a.id) < c.gs.config.gossip_threshold
            asked = c.gs.counters["iwant_sent"]
            ctl3 = Control()
            ctl3.ihave.append((T, [b"ignored"]))
            a.gs._peers.send_control(a.gs._peers.get(c.id), ctl3)
            await heartbeats([c.gs], 3)
            assert c.gs.counters["iwant_sent"] == asked
        finally:
            await stop(nodes)
    run(go())


def test_bad_signatures_are_rejected_scored_and_graylisted() -> None:
    async def go() -> None:
        nodes = await start(2)
        a, b = nodes
        try:
            b.sub()
            await link(a, b)
            ka = a.gs.host.key
            other = KeyPair.generate()
            bad = [
                forged(ka, T, b"bad sig", b"00000001", signer=other),
                forged(ka, T, b"wrong key", b"00000002", signer=other, key=other.public.encode()),
                forged(ka, T, b"unsigned", b"00000003", sign=False),
            ]
            for i, m in enumerate(bad):
                a.inject(b, RPC(publish=[m]).encode())
                await settle(lambda i=i: b.gs.counters["invalid"] == i + 1)
            assert b.gs.counters["invalid_signature"] == 3
            assert b.got == []
            assert b.gs.score(a.id) == pytest.approx(-90.0, abs=3.0)
            # Graylisted now: even a good message from it is ignored.
            await a.gs.publish(T, b"good but graylisted")
            await settle(lambda: b.gs.counters["graylisted_rpcs"] >= 1)
            assert b.got == []
            # No from/seqno at all is invalid too (StrictSign).
            assert Message(data=b"x", topic=T).from_ is None
        finally:
            await stop(nodes)
    run(go())


def test_validators_accept_reject_ignore_throttle() -> None:
    async def go() -> None:
        nodes = await start(3)
        a, b, c = nodes
        try:
            b.sub()
            c.sub()
            await link(a, b)
            await link(b, c)
            await settle(lambda: c.id in b.gs.mesh_peers(T))
            verdicts = {b"a": "accept", b"r": "reject", b"i": "ignore", b"t": "throttle"}

            async def by_first_byte(m: GossipMessage) -> str:
                await asyncio.sleep(0)
                return verdicts.get(m.data[:1], "accept")

            b.gs.set_validator(T, by_first_byte)
            b.gs.set_validator("/test/", lambda m: "ignore" if m.data == b"a-prefix" else "accept",
                               prefix=True)
            for d in (b"a1", b"r1", b"i1", b"t1", b"a-prefix", b"a2"):
                await a.gs.publish(T, d)
            await settle(lambda: b.data() == [b"a1", b"a2"])
            await settle(lambda: c.data() == [b"a1", b"a2"])  # only accepted ones go on
            cb = b.gs.counters
            assert (cb["rejected"], cb["ignored"], cb["throttled"]) == (1, 2, 1)
            assert b.gs.peer_throttled(a.id) == 1
            assert b.gs.score(a.id) == pytest.approx(-10.0, abs=0.5)  # reject penalises
            # A validator that fails counts as ignore.
            b.gs.set_validator(T, lambda m: 1 / 0)  # type: ignore[arg-type,return-value]
            await a.gs.publish(T, b"a3")
            await settle(lambda: cb["validator_errors"] == 1)
            assert b.data() == [b"a1", b"a2"]
            # Our own validators run on what we publish.
            a.gs.set_validator(T, lambda m: "reject")
            with pytest.raises(PublishRejected):
                await a.gs.publish(T, b"mine")
            a.gs.remove_validator(T)
        finally:
            await stop(nodes)
    run(go())


def test_malformed_and_oversized_rpcs_close_the_stream() -> None:
    async def go() -> None:
        nodes = await start(1, max_transmit_size=4096)
        (b,) = nodes
        b.sub()
        raw = make_host()
        await raw.start()
        try:
            await raw.connect(addr_of(b.gs.host))
            st = await raw.new_stream(b.id, ["/meshsub/1.1.0"])
            await st.write_lp(b"\x0a\x05ab")  # length beyond input
            await settle(lambda: b.gs.counters["malformed_rpcs"] == 1)
            assert b.gs.score(raw.peer_id) < 0
            st2 = await raw.new_stream(b.id, ["/meshsub/1.1.0"])
            await st2.write_lp(b"\x00" * 5000)  # beyond max_transmit_size
            await settle(lambda: b.gs.counters["malformed_rpcs"] == 2)
            with pytest.raises(StreamReset):  # the router resets a stream that broke a rule
                for _ in range(3):
                    await st2.write_lp(b"")
                    await asyncio.sleep(0.05)
                await st2.read_lp(10)
        finally:
            await raw.close()
            await stop(nodes)
    run(go())


def test_floodsub_peers_get_flooded_and_publish() -> None:
    async def go() -> None:
        nodes = await start(2)
        a, f = nodes
        await f.gs.stop()
        f.gs = GossipSub(f.gs.host, GossipConfig(protocols=(FLOODSUB,), **FAST))
        await f.gs.start()
        try:
            a.sub()
            f.sub()
            await link(a, f)
            assert a.gs._peers.get(f.id).proto == FLOODSUB
            await heartbeats([a.gs], 3)
            assert a.gs.mesh_peers(T) == []  # floodsub peers never join the mesh
            await a.gs.publish(T, b"to floodsub")
            await f.gs.publish(T, b"from floodsub")
            await settle(lambda: f.data() == [b"to floodsub"] and a.data() == [b"from floodsub"])
        finally:
            await stop(nodes)
    run(go())


def test_fanout_for_topics_we_do_not_join() -> None:
    async def go() -> None:
        nodes = await start(3, flood_publish=False, fanout_ttl_s=0.4)
        a, b, c = nodes
        try:
            b.sub()
            c.sub()
            await link(a, b)
            await link(a, c)
            await a.gs.publish(T, b"fan")
            assert sorted(a.gs.fanout_peers(T)) == sorted([b.id, c.id])
            await settle(lambda: b.data() == [b"fan"] and c.data() == [b"fan"])
            await settle(lambda: a.gs.fanout_peers(T) == [], 10.0)  # expired after the TTL
            # Joining a topic with fanout peers turns them into the mesh.
            await a.gs.publish(T, b"fan2")
            a.sub()
            assert sorted(a.gs.mesh_peers(T)) == sorted([b.id, c.id])
        finally:
            await stop(nodes)
    run(go())


def test_idontwant_for_large_messages() -> None:
    async def go() -> None:
        nodes = await start(3, idontwant_min_bytes=1000)
        a, b, c = nodes
        try:
            await triangle(nodes)
            for i in range(5):
                await a.gs.publish(T, bytes([i]) * 5000)
            await settle(lambda: len(b.got) == 5 and len(c.got) == 5)
            sent = sum(n.gs.counters["idontwant_sent"] for n in nodes)
            await settle(lambda: sum(n.gs.counters["idontwant_received"] for n in nodes) == sent)
            assert sent >= 5
            await b.gs.publish(T, b"small")
            await heartbeats([n.gs for n in nodes], 1)
            assert sum(n.gs.counters["idontwant_sent"] for n in nodes) == sent
        finally:
            await stop(nodes)
    run(go())


def test_unsubscribe_disconnect_and_handlers() -> None:
    async def go() -> None:
        nodes = await start(2)
        a, b = nodes
        try:
            got: list[bytes] = []

            async def slow(m: GossipMessage) -> None:
                await asyncio.sleep(0.01)
                got.append(m.data)

            def broken(m: GossipMessage) -> None:
                raise RuntimeError("subscriber bug")

            b.gs.subscribe(T, slow)
            b.gs.subscribe("/other", broken)
            a.sub("/other")
            await link(a, b)
            await settle(lambda: b.id in a.gs.peers("/other"))
            await a.gs.publish(T, b"async handler")
            await a.gs.publish("/other", b"to broken")
            await settle(lambda: got == [b"async handler"])
            await settle(lambda: b.gs.counters["handler_errors"] == 1)
            assert sorted(b.gs.subscriptions()) == ["/other", T]
            b.gs.unsubscribe(T)
            await settle(lambda: b.id not in a.gs.peers(T))
            await b.gs.host.close()
            await settle(lambda: a.gs.peers() == [])
            assert a.gs.mesh_peers("/other") == []
        finally:
            await stop(nodes)
    run(go())


def test_routers_started_after_the_connection_find_each_other() -> None:
    async def go() -> None:
        h1, h2, plain = make_host(), make_host(), make_host()
        for h in (h1, h2, plain):
            await h.start()
        g1 = GossipSub(h1, GossipConfig(**FAST))
        g2 = GossipSub(h2, GossipConfig(**FAST))
        try:
            await h1.connect(addr_of(h2))
            await h1.connect(addr_of(plain))  # speaks no pubsub at all
            await g1.start()  # h2 has no handler yet: negotiation fails, then identify push
            g1.subscribe(T, lambda m: None)
            await heartbeats([g1])
            got: list[bytes] = []
            g2.subscribe(T, lambda m: got.append(m.data))
            await g2.start()
            await settle(lambda: h2.peer_id in g1.mesh_peers(T) and h1.peer_id in g2.mesh_peers(T))
            assert g1.peers() == [h2.peer_id]  # not the plain host
            await g1.publish(T, b"late start")
            await settle(lambda: got == [b"late start"])
        finally:
            await g1.stop()
            await g2.stop()
            for h in (h1, h2, plain):
                await h.close()
    run(go())


def test_score_decays_and_graylisting_lifts() -> None:
    async def go() -> None:
        nodes = await start(2, score_decay=0.5)
        a, b = nodes
        try:
            b.sub()
            await link(a, b)
            # forged messages until b ignores a: each one lowers a's score, each heartbeat
            # forgives some (how many heartbeats fall between them depends on the machine)
            deadline = asyncio.get_running_loop().time() + 20
            i = 0
            while b.gs.counters["graylisted_rpcs"] == 0:
                assert asyncio.get_running_loop().time() < deadline, b.gs.score(a.id)
                i += 1
                bad = forged(a.gs.host.key, T, b"x", b"%08d" % i, signer=KeyPair.generate())
                a.inject(b, RPC(publish=[bad]).encode())
                await asyncio.sleep(0.01)
            assert b.gs.counters["invalid_signature"] >= 3  # 3 at the least: 3 * 3 * -10
            assert b.data() == []
            await settle(lambda: b.gs.score(a.id) > -1.0)
            await a.gs.publish(T, b"forgiven")
            await settle(lambda: b.data() == [b"forgiven"])
        finally:
            await stop(nodes)
    run(go())


def test_publish_limits_and_peer_limit() -> None:
    async def go() -> None:
        nodes = await start(3, max_transmit_size=2048, max_peers=1)
        a, b, c = nodes
        try:
            with pytest.raises(ValueError):
                await a.gs.publish(T, bytes(4096))
            b.sub()
            c.sub()
            await a.gs.host.connect(addr_of(b.gs.host))
            await settle(lambda: a.gs.peers() == [b.id])
            await a.gs.host.connect(addr_of(c.gs.host))
            await heartbeats([a.gs], 3)
            assert a.gs.peers() == [b.id]  # max_peers: c is not taken on
            # Nobody to send to: the id still comes back, and it is counted.
            before = c.gs.counters["published_no_peers"]
            await c.gs.publish("/nobody/here", b"x")
            assert c.gs.counters["published_no_peers"] == before + 1
        finally:
            await stop(nodes)
    run(go())


@pytest.mark.parametrize("bad", [
    {"D_low": 0}, {"D_score": 99}, {"D_out": 5},
    {"mcache_gossip": 6, "mcache_len": 5}, {"mcache_len": 0, "mcache_gossip": 0},
    {"heartbeat_s": 0},
])
def test_config_check_refuses_impossible_settings(bad: dict[str, Any]) -> None:
    GossipConfig().check()
    with pytest.raises(ValueError):
        GossipConfig(**bad).check()
