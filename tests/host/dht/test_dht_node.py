"""The asyncio DHT node on loopback UDP: every BEP 5 / BEP 44 query between two of our
nodes, and bad input from a raw socket: malformed bencode, bad signatures, stale seq,
oversize values and salts, wrong tokens, unknown topics, floods from one address -- each
answered with the right BEP error or ignored, rate-limited and counted, memory bounded."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pubmote.dht import bencode, bep44, krpc
from pubmote.dht.node import DhtNode

TIMEOUT_S = 20


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), TIMEOUT_S))


class RawPeer(asyncio.DatagramProtocol):
    """A bare UDP socket speaking KRPC by hand, collecting what comes back."""

    def __init__(self) -> None:
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()
        self.transport: Any = None
        self.id = os.urandom(20)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.replies.put_nowait(data)

    @classmethod
    async def open(cls, host: str = "127.0.0.1") -> RawPeer:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_datagram_endpoint(cls, local_addr=(host, 0))
        return proto

    def send(self, node: DhtNode, data: bytes) -> None:
        self.transport.sendto(data, node.addr)

    async def ask(self, node: DhtNode, method: bytes, args: dict[bytes, Any],
                  topic: bytes | None = None) -> krpc.Message:
        a = {b"id": self.id, **args}
        while not self.replies.empty():  # answers to earlier sends are not this one's
            self.replies.get_nowait()
        self.send(node, krpc.encode_query(b"q1", method, a, topic=topic))
        return krpc.parse(await asyncio.wait_for(self.replies.get(), 2))

    async def token(self, node: DhtNode, target: bytes) -> bytes:
        r = await self.ask(node, b"get", {b"target": target})
        tok = r.args[b"token"]
        assert isinstance(tok, bytes)
        return tok

    def close(self) -> None:
        self.transport.close()


async def _until(pred: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        await asyncio.sleep(0.01)


async def _node(**kw: Any) -> DhtNode:
    n = DhtNode(host="127.0.0.1", port=0, query_timeout_s=0.5, **kw)
    await n.start()
    return n


def test_two_nodes_all_queries() -> None:
    async def body() -> None:
        a, b = await _node(), await _node()
        try:
            assert await a.ping(b.addr) == b.node_id
            assert len(a.table) == 1 and len(b.table) == 1  # both learned each other
            # find_node
            res = await a.lookup(os.urandom(20), b"find_node")
            assert [f.id for f in res.nodes] == [b.node_id]
            # get_peers + announce_peer with the token from get_peers
            ih = os.urandom(20)
            assert await a.announce(ih, port=7777) == 1  # stored at b, the only other node
            found = await a.get_peers(ih)  # a asks b, which answers with the peer
            assert ("127.0.0.1", 7777) in found.peers, found.peers
            # BEP 44 put from a, get from b
            kp = bep44.KeyPair.generate()
            item = bep44.sign_item(kp, [b"list", 1, {b"k": b"v"}], 3, b"salt")
            assert await a.put_mutable(item) == 1
            assert b.store.get_mutable(item.target) is not None
            got = await b.get_mutable(kp.public, b"salt")
            assert got is not None and got.seq == 3 and got.value() == [b"list", 1, {b"k": b"v"}]
            # a get with our seq as new returns no item, just seq
            fresh = await a.query(b.addr, b"get", {b"target": item.target, b"seq": 3})
            assert fresh is not None and fresh.args.get(b"seq") == 3 and b"v" not in fresh.args
            # immutable put/get by hand
            tok = (await a.query(b.addr, b"get", {b"target": os.urandom(20)}))
            assert tok is not None
            r = await a.query(b.addr, b"put", {b"token": tok.args[b"token"], b"v": b"imm"})
            assert r is not None and r.kind == b"r"
            t = bep44.immutable_target(b"3:imm")
            r = await a.query(b.addr, b"get", {b"target": t})
            assert r is not None and r.args[b"v"] == b"imm"
        finally:
            await a.close()
            await b.close()

    run(body)


def test_bad_input_gets_bep_errors() -> None:
    async def body() -> None:
        node = await _node(store_max=5)
        peer = await RawPeer.open()
        try:
            kp = bep44.KeyPair.generate()
            item = bep44.sign_item(kp, b"v1", 5, b"s")
            tok = await peer.token(node, item.target)

            async def put(**over: Any) -> int:
                a = item.put_args(peer.id, tok)
                for k, v in over.items():
                    a[k.encode()] = v
                r = await peer.ask(node, b"put", a)
                return 0 if r.kind == b"r" else r.error()[0]

            assert await put(token=b"wrongtok") == krpc.PROTOCOL_ERROR
            assert await put(sig=bytes(64)) == krpc.INVALID_SIGNATURE
            assert await put(v=b"x" * 2000) == krpc.MESSAGE_TOO_BIG
            assert await put(salt=b"s" * 65) == krpc.SALT_TOO_BIG
            assert await put() == 0
            older = bep44.sign_item(kp, b"v0", 4, b"s")
            r = await peer.ask(node, b"put", older.put_args(peer.id, tok))
            assert r.error()[0] == krpc.SEQ_TOO_LOW
            newer = bep44.sign_item(kp, b"v2", 6, b"s")
            r = await peer.ask(node, b"put", newer.put_args(peer.id, tok, cas=1))
            assert r.error()[0] == krpc.CAS_MISMATCH
            r = await peer.ask(node, b"frobnicate", {})
            assert r.error()[0] == krpc.METHOD_UNKNOWN
            r = await peer.ask(node, b"get", {b"target": b"short"})
            assert r.error()[0] == krpc.PROTOCOL_ERROR
            r = await peer.ask(node, b"ping", {}, topic=os.urandom(20))
            assert r.error()[0] == krpc.PROTOCOL_ERROR  # a topic we are not in
            r = await peer.ask(node, b"announce_peer", {b"info_hash": os.urandom(20),
                                                        b"port": 1, b"token": b"12345678"})
            assert r.error()[0] == krpc.PROTOCOL_ERROR  # wrong token
            # malformed: answered with 203 when the transaction id can be read, else silence
            peer.send(node, b"d1:t2:xx1:y1:qe")
            e = krpc.parse(await asyncio.wait_for(peer.replies.get(), 2))
            assert e.tid == b"xx" and e.error()[0] == krpc.PROTOCOL_ERROR
            for junk in (b"", b"garbage", b"d1:t2:xx", b"i1e", b"l" * 100, os.urandom(300),
                         b"x" * 9000):
                peer.send(node, junk)
            await _until(lambda: node.counters["oversize"] == 1
                         and node.counters["malformed"] >= 6, "the junk to be counted")
            assert peer.replies.empty()
            # storage is bounded: 20 valid items, 5 kept
            for n in range(20):
                it = bep44.sign_item(kp, b"x", 1, b"salt%d" % n)
                t2 = await peer.token(node, it.target)
                assert (await peer.ask(node, b"put", it.put_args(peer.id, t2))).kind == b"r"
            assert len(node.store) == 5
            assert node.counters["handler_failed"] == 0
        finally:
            peer.close()
            await node.close()

    run(body)


def test_flood_from_one_address_is_rate_limited() -> None:
    async def body() -> None:
        node = await _node(rate_per_s=20.0, rate_burst=40.0)
        flood, other = await RawPeer.open("127.0.0.1"), await RawPeer.open("127.0.0.2")
        try:
            q = krpc.encode_query(b"fl", b"ping", {b"id": flood.id})
            t0 = time.monotonic()
            for _ in range(2000):
                flood.send(node, q)
                # one loop turn per datagram: the node reads one per turn, so its socket
                # buffer does not overflow (how many it would drop depends on the machine)
                await asyncio.sleep(0)
            # until every datagram that reached the node is either answered or dropped
            await _until(lambda: flood.replies.qsize() >= 40 and flood.replies.qsize()
                         + node.counters["rate_limited"] == node.counters["rx_msgs"],
                         "the flood to be answered or dropped")
            answered = flood.replies.qsize()
            refilled = 20.0 * (time.monotonic() - t0)
            assert 40 <= answered <= 40 + refilled + 1  # the burst plus the rate meanwhile
            # every datagram that reached the node past the budget was dropped unparsed
            rx = node.counters["rx_msgs"]
            assert node.counters["rate_limited"] == rx - answered and rx > 150
            # another address is not starved by the flood
            r = await other.ask(node, b"ping", {})
            assert r.kind == b"r"
        finally:
            flood.close()
            other.close()
            await node.close()

    run(body)


def test_tables_bounded_under_many_sources() -> None:
    async def body() -> None:
        node = await _node()
        node.limiter.max_sources = 10
        peers = [await RawPeer.open("127.0.9.%d" % (i + 1)) for i in range(30)]
        try:
            for p in peers:
                for _ in range(3):
                    p.send(node, krpc.encode_query(b"aa", b"find_node",
                                                   {b"id": os.urandom(20),
                                                    b"target": os.urandom(20)}))
            await _until(lambda: node.limiter.counters["evicted"] >= 20, "evictions")
            assert len(node.limiter) == 10
            assert len(node.table) <= 8 * len(node.table.buckets)
            # announce 200 hashes into a store of 50: bounded
            node.peer_store.max_hashes = 50
            for i in range(200):
                p = peers[i % 30]
                ih = os.urandom(20)
                r = await p.ask(node, b"get_peers", {b"info_hash": ih})
                await p.ask(node, b"announce_peer", {b"info_hash": ih, b"port": 9,
                                                     b"token": r.args[b"token"]})
            assert len(node.peer_store.peers) == 50
            assert node.peer_store.counters["evicted"] == 150
        finally:
            for p in peers:
                p.close()
            await node.close()

    run(body)


@pytest.mark.parametrize("limit", [1, 4])
def test_outstanding_queries_are_bounded(limit: int) -> None:
    async def body() -> None:
        node = await _node(max_pending=limit)
        silent = await RawPeer.open()
        try:
            results = await asyncio.gather(*(node.query(("127.0.0.1", silent.transport
                                                         .get_extra_info("sockname")[1]),
                                                        b"ping", {}) for _ in range(10)))
            assert results == [None] * 10
            assert node.transactions.counters["full"] == 10 - limit
            assert len(node.transactions) == 0
        finally:
            silent.close()
            await node.close()

    run(body)


def test_answers_are_canonical_bencode() -> None:
    async def body() -> None:
        node = await _node()
        peer = await RawPeer.open()
        try:
            peer.send(node, krpc.encode_query(b"zz", b"find_node",
                                              {b"id": peer.id, b"target": os.urandom(20)}))
            raw = await asyncio.wait_for(peer.replies.get(), 2)
            assert bencode.encode(bencode.decode(raw)) == raw
        finally:
            peer.close()
            await node.close()

    run(body)


class _SinkTransport:
    """Stands in for the UDP transport: keeps what the node sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, Any]] = []

    def sendto(self, data: bytes, addr: Any) -> None:
        self.sent.append((data, addr))

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 6881)

    def close(self) -> None:
        pass


def test_mutated_queries_never_crash_the_node() -> None:
    """Valid queries of every kind, cut, spliced and bit-flipped, straight into the node's
    datagram handler: answered or dropped, the handler never fails."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    kp = bep44.KeyPair.generate()
    item = bep44.sign_item(kp, {b"n": [1, 2, b"x"]}, 9, b"salt")
    nid = os.urandom(20)
    seeds = [
        krpc.encode_query(b"aa", b"ping", {b"id": nid}),
        krpc.encode_query(b"ab", b"find_node", {b"id": nid, b"target": nid}),
        krpc.encode_query(b"ac", b"get_peers", {b"id": nid, b"info_hash": nid}),
        krpc.encode_query(b"ad", b"announce_peer", {b"id": nid, b"info_hash": nid,
                                                    b"port": 1, b"token": b"t" * 8}),
        krpc.encode_query(b"ae", b"get", {b"id": nid, b"target": item.target, b"seq": 1}),
        krpc.encode_query(b"af", b"put", item.put_args(nid, b"t" * 8, cas=3)),
        krpc.encode_query(b"ag", b"put", {b"id": nid, b"token": b"t" * 8, b"v": [b"a"]}),
        krpc.encode_response(b"ah", {b"id": nid, b"nodes": b"x" * 26}),
        krpc.encode_error(b"ai", 201, "x"),
    ]

    async def make() -> DhtNode:
        n = DhtNode(rate_per_s=1e9, rate_burst=1e9)
        n.connection_made(_SinkTransport())  # type: ignore[arg-type]
        n.store.put_mutable(item)
        return n

    loop = asyncio.new_event_loop()
    node = loop.run_until_complete(make())

    @settings(max_examples=600, deadline=None)
    @given(st.sampled_from(seeds), st.integers(0, 2000), st.binary(max_size=6),
           st.integers(0, 255), st.booleans())
    def check(seed: bytes, pos: int, junk: bytes, flip: int, cut: bool) -> None:
        b = bytearray(seed)
        p = pos % len(b)
        if cut:
            del b[p:]
        else:
            b[p:p + len(junk)] = junk
            if p < len(b):
                b[p] ^= flip
        node.datagram_received(bytes(b), ("127.0.0.5", 4000 + flip))

    try:
        check()
        assert node.counters["handler_failed"] == 0
        assert node.counters["queries_in"] + node.counters["malformed"] > 0
        assert len(node.store) <= node.store.max_items
    finally:
        loop.run_until_complete(node.close())
        loop.close()


def test_read_only_client_is_not_kept_and_refresh_runs() -> None:
    async def body() -> None:
        a = await _node(read_only=True)
        b = await _node(refresh_s=0.05)
        try:
            assert await a.ping(b.addr) == b.node_id
            assert len(a.table) == 1 and len(b.table) == 0  # BEP 43: b does not keep a
            c = await _node()
            await c.ping(b.addr)
            sent = b.transactions.counters["sent"]
            # b refreshes its table by itself
            await _until(lambda: b.transactions.counters["sent"] > sent, "b's refresh")
            await c.close()
        finally:
            await a.close()
            await b.close()

    run(body)
