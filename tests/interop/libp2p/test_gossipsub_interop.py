"""pubmote's GossipSub against the GossipSub of js-libp2p (@libp2p/gossipsub 17) and of
py-libp2p 0.8.1: each joins a pubmote mesh (GRAFT both ways), messages flow both directions
and through relays, our StrictSign signatures are accepted by them and theirs by us, and a
mixed pubmote + js + py mesh relays through each of its members."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from libp2p_peers import LoopRunner, PeerProcess, check_installed, start_js, start_py

from pubmote.p2p import Host, KeyPair, PeerId
from pubmote.p2p.pubsub.router import GossipConfig, GossipMessage, GossipSub

STARTERS = {"js": start_js, "py": start_py}
# Fast heartbeats everywhere so meshes form within a second.
OPTS: dict[str, dict[str, Any]] = {"js": {"heartbeatInterval": 200},
                                   "py": {"heartbeat_s": 0.2}}


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    check_installed()


class Ours:
    """A pubmote GossipSub node and what its subscribers got, per topic."""

    def __init__(self) -> None:
        self.host = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
        self.gs = GossipSub(self.host, GossipConfig(heartbeat_s=0.2))
        self.got: dict[str, list[GossipMessage]] = {}

    @property
    def addr(self) -> str:
        return str(self.host.listen_addrs[0].with_p2p(str(self.host.peer_id)))

    @property
    def id(self) -> str:
        return str(self.host.peer_id)

    def sub(self, topic: str) -> None:
        self.gs.subscribe(topic, self.got.setdefault(topic, []).append)

    def data(self, topic: str) -> list[bytes]:
        return [m.data for m in self.got.get(topic, [])]


@contextlib.asynccontextmanager
async def network(n_ours: int, others: list[str]) -> AsyncIterator[
        tuple[list[Ours], list[PeerProcess]]]:
    ours = [Ours() for _ in range(n_ours)]
    procs: list[PeerProcess] = []
    try:
        for o in ours:
            await o.host.start()
            await o.gs.start()
        for kind in others:
            procs.append(await STARTERS[kind](gossip=OPTS[kind]))
        yield ours, procs
    finally:
        for p in procs:
            await p.kill()
        for o in ours:
            await o.gs.stop()
            await o.host.close()


async def settle(cond: Callable[[], bool], timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not cond():
        assert loop.time() - t0 < timeout_s, "condition not met"
        await asyncio.sleep(0.05)


async def their_mesh(p: PeerProcess, topic: str, want: set[str], timeout_s: float = 8.0) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while True:
        res = await p.call("gs_peers", topic=topic)
        if want <= set(res["mesh"]):
            return
        assert loop.time() - t0 < timeout_s, "%s mesh %s lacks %s" % (p.name, res, want)
        await asyncio.sleep(0.1)


async def their_data(p: PeerProcess, topic: str, count: int) -> list[dict[str, Any]]:
    res = await p.call("gs_wait", topic=topic, count=count, timeout_ms=8000)
    msgs: list[dict[str, Any]] = res["messages"]
    return msgs


@pytest.mark.parametrize("kind", ["js", "py"])
def test_peer_joins_a_pubmote_mesh(runner: LoopRunner, kind: str) -> None:
    """them - ours[0] - ours[1]: both directions, relayed by pubmote, signatures checked
    by both sides (the relay forwards the publisher's signed bytes)."""
    topic = "/interop/%s/join" % kind

    async def go() -> None:
        async with network(2, [kind]) as (ours, (peer,)):
            a, b = ours
            a.sub(topic)
            b.sub(topic)
            await peer.call("gs_subscribe", topic=topic)
            await a.host.connect(b.addr)
            await a.host.connect(peer.addr)
            # GRAFT interop: each side has the other in its mesh.
            await settle(lambda: PeerId.from_base58(peer.peer_id) in a.gs.mesh_peers(topic))
            await their_mesh(peer, topic, {a.id})
            await settle(lambda: b.host.peer_id in a.gs.mesh_peers(topic))
            # pubmote -> them, through the relay a: they accept b's signature.
            for i in range(5):
                await b.gs.publish(topic, b"ours %d" % i)
            msgs = await their_data(peer, topic, 5)
            assert [bytes.fromhex(m["data"]) for m in msgs] == [b"ours %d" % i for i in range(5)]
            assert all(m["from"] == b.id for m in msgs)
            # them -> pubmote: a verifies their signature and relays to b.
            for i in range(5):
                await peer.call("gs_publish", topic=topic, data=(b"theirs %d" % i).hex())
            want = [b"theirs %d" % i for i in range(5)]
            ours_sent = [b"ours %d" % i for i in range(5)]
            await settle(lambda: a.data(topic) == ours_sent + want and b.data(topic) == want)
            assert all(str(m.from_peer) == peer.peer_id for m in b.got[topic])
            assert all(m.received_from == a.host.peer_id for m in b.got[topic])
            for o in ours:
                assert o.gs.counters["invalid"] == 0 and o.gs.counters["rejected"] == 0
            assert a.gs.counters["duplicates"] + b.gs.counters["duplicates"] <= 5
    runner.run(go(), 40.0)


def test_mixed_mesh_relays_through_each_member(runner: LoopRunner) -> None:
    """A chain q - js - p - py - r (q, p, r pubmote): every implementation sits in the
    middle and relays what the others signed; end to end crosses all three."""
    topic = "/interop/mixed/chain"

    async def go() -> None:
        async with network(3, ["js", "py"]) as (ours, (js, py)):
            q, p, r = ours
            for o in ours:
                o.sub(topic)
            for peer in (js, py):
                await peer.call("gs_subscribe", topic=topic)
            await q.host.connect(js.addr)
            await p.host.connect(js.addr)
            await p.host.connect(py.addr)
            await r.host.connect(py.addr)
            await their_mesh(js, topic, {q.id, p.id})
            await their_mesh(py, topic, {p.id, r.id})
            await settle(lambda: len(p.gs.mesh_peers(topic)) == 2)
            await q.gs.publish(topic, b"from q")
            await settle(lambda: r.data(topic) == [b"from q"])  # via js, p and py
            assert str(r.got[topic][0].from_peer) == q.id
            assert str(r.got[topic][0].received_from) == py.peer_id
            await r.gs.publish(topic, b"from r")
            await settle(lambda: q.data(topic) == [b"from r"])  # via py, p and js
            await js.call("gs_publish", topic=topic, data=b"from js".hex())
            await py.call("gs_publish", topic=topic, data=b"from py".hex())
            await p.gs.publish(topic, b"from p")
            everything = {b"from q", b"from r", b"from js", b"from py", b"from p"}
            for o in ours:
                await settle(lambda o=o: set(o.data(topic)) == everything - {
                    b"from " + {q: b"q", p: b"p", r: b"r"}[o]})
                assert len(o.data(topic)) == 4  # each exactly once
            js_got = [bytes.fromhex(m["data"]) for m in await their_data(js, topic, 4)]
            py_got = [bytes.fromhex(m["data"]) for m in await their_data(py, topic, 4)]
            assert sorted(js_got) == sorted(everything - {b"from js"})
            # py-libp2p also hands its own messages to its own subscribers
            assert sorted(d for d in py_got if d != b"from py") == \
                sorted(everything - {b"from py"})
            for o in ours:
                assert o.gs.counters["invalid"] == 0 and o.gs.counters["rejected"] == 0
    runner.run(go(), 50.0)
