"""An asyncio UDP node of the BitTorrent DHT (BEP 5) with BEP 44 storage.

It answers ping, find_node, get_peers, announce_peer, get and put; it runs iterative
lookups (find_node, get_peers, get) and puts; it bootstraps from given addresses. Every
table is bounded and counts what it drops; queries are rate-limited per source address.
BEP 50 topic overlays (bep50.py) share the socket, the node id and the token secret:
messages carrying `c` are handed to the overlay for that topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Protocol, cast

from pubmote.dht import bencode, bep44, krpc
from pubmote.dht.krpc import (
    METHOD_UNKNOWN,
    PROTOCOL_ERROR,
    SERVER_ERROR,
    Addr,
    KrpcError,
    Message,
)
from pubmote.dht.routing import K, RoutingTable, distance, random_id

log = logging.getLogger("pubmote.dht")

VERSION = b"PM\x00\x01"  # client version in every message (BEP 5 `v`): pubmote 0.1
MAX_DATAGRAM = 8192  # DHT messages fit in one unfragmented datagram; larger are dropped
ALPHA = 3  # concurrent queries per lookup (BEP 5 / Kademlia)
MAX_SHORTLIST = 64  # candidates a lookup keeps
MAX_PEERS_PER_HASH = 100
MAX_VALUES_REPLY = 50  # peers per get_peers answer: fits in one datagram
REFRESH_S = 15 * 60.0  # BEP 5: buckets unchanged for 15 minutes are refreshed
_METHODS = ("ping", "find_node", "get_peers", "announce_peer", "get", "put")


class Overlay(Protocol):
    """What the node needs of a BEP 50 topic network (see bep50.TopicOverlay)."""

    target: bytes
    table: RoutingTable

    def handle_query(self, msg: Message, addr: Addr) -> dict[bytes, Any]: ...


class RateLimiter:
    """A token bucket per source IP: `rate_per_s` sustained, `burst` at once. At most
    `max_sources` buckets are kept (least recently seen dropped first)."""

    def __init__(self, rate_per_s: float, burst: float, max_sources: int = 4096) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_sources = max_sources
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()
        self.counters = {"limited": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, ip: str, now: float | None = None) -> bool:
        t = time.monotonic() if now is None else now
        b = self._buckets.get(ip)
        if b is None:
            if len(self._buckets) >= self.max_sources:
                self._buckets.popitem(last=False)
                self.counters["evicted"] += 1
            b = self._buckets[ip] = [self.burst, t]
        else:
            self._buckets.move_to_end(ip)
            b[0] = min(self.burst, b[0] + (t - b[1]) * self.rate_per_s)
            b[1] = t
        if b[0] >= 1.0:
            b[0] -= 1.0
            return True
        self.counters["limited"] += 1
        return False


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


class Found:
    """One node that answered a lookup: its id, address and write token."""

    __slots__ = ("id", "addr", "token")

    def __init__(self, nid: bytes, addr: Addr, token: bytes | None) -> None:
        self.id = nid
        self.addr = addr
        self.token = token


class LookupResult:
    """What an iterative lookup found: the nearest nodes that answered (with tokens),
    peers (get_peers), and the newest valid mutable item (get)."""

    def __init__(self) -> None:
        self.nodes: list[Found] = []
        self.peers: list[Addr] = []
        self.item: bep44.MutableItem | None = None
        self.immutable: bytes | None = None
        self.queried = 0


class DhtNode(asyncio.DatagramProtocol):
    """A DHT node on one UDP socket; `async with DhtNode(port=...) as node:`."""

    def __init__(self, *, host: str = "0.0.0.0", port: int = 0, node_id: bytes | None = None,
                 bootstrap: Iterable[Addr] = (), store_max: int = 1000,
                 rate_per_s: float = 50.0, rate_burst: float = 100.0,
                 query_timeout_s: float = 2.0, max_pending: int = 2048,
                 max_topics: int = 64, read_only: bool = False,
                 refresh_s: float = REFRESH_S) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id if node_id is not None else random_id()
        self.bootstrap_addrs = list(bootstrap)
        self.table = RoutingTable(self.node_id)
        self.store = bep44.ItemStore(store_max)
        self.peer_store = PeerStore()
        self.tokens = bep44.Tokens()
        self.limiter = RateLimiter(rate_per_s, rate_burst)
        self.transactions = krpc.Transactions(max_pending)
        self.query_timeout_s = query_timeout_s
        # BEP 43: a short-lived client (a CLI call) marks its queries `ro` so that nobody
        # keeps it in a routing table and waits on it after it is gone
        self.read_only = read_only
        self.refresh_s = refresh_s
        self.overlays: dict[bytes, Overlay] = {}
        self.max_topics = max_topics
        self.transport: asyncio.DatagramTransport | None = None
        self._pending_by_addr: dict[Addr, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # queries answered, by method (only the six known names; the rest count as other)
        self.methods_in: dict[str, int] = dict.fromkeys(_METHODS + ("other",), 0)
        self.counters: dict[str, int] = {
            "rx_msgs": 0, "rx_bytes": 0, "tx_msgs": 0, "tx_bytes": 0, "queries_in": 0,
            "oversize": 0, "malformed": 0, "rate_limited": 0, "errors_sent": 0,
            "bad_token": 0, "unknown_topic": 0, "handler_failed": 0, "rx_failed": 0}

    # ---- lifetime --------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: self, local_addr=(self.host, self.port))
        if self.bootstrap_addrs:
            await self.bootstrap()
        if not self.read_only:
            self.spawn(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                # a table that lost its nodes (a long outage) starts over from the seeds
                seeds = self.bootstrap_addrs if len(self.table) < K else []
                await self.lookup(self.node_id, b"find_node", seeds=seeds)
                await self.lookup(random_id(), b"find_node")
            except Exception:  # noqa: BLE001 - upkeep must outlive any one failure
                log.exception("routing table refresh failed")

    async def __aenter__(self) -> DhtNode:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.transactions.cancel_all()
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run coro as a task owned by the node (cancelled at close)."""
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    @property
    def addr(self) -> Addr:
        return self.host, self.port

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # the selector loop's datagram transport is not a DatagramTransport subclass
        self.transport = cast(asyncio.DatagramTransport, transport)
        self.host, self.port = transport.get_extra_info("sockname")[:2]

    def error_received(self, exc: Exception) -> None:
        log.debug("udp error: %s", exc)  # ICMP unreachable from a gone peer: a timeout follows

    # ---- receiving -------------------------------------------------------------------

    def datagram_received(self, data: bytes, addr: Any) -> None:
        try:
            self._on_datagram(data, addr)
        except Exception:  # noqa: BLE001 - nothing a peer sends may stop the node
            self.counters["rx_failed"] += 1
            if self.counters["rx_failed"] % 1000 == 1:  # the first, then every 1000th
                log.exception("datagram from %s failed (%d so far)", addr, self.counters["rx_failed"])

    def _on_datagram(self, data: bytes, addr: Any) -> None:
        src: Addr = (str(addr[0]), int(addr[1]))
        c = self.counters
        c["rx_msgs"] += 1
        c["rx_bytes"] += len(data)
        if len(data) > MAX_DATAGRAM:
            c["oversize"] += 1
            return
        # answers to our own queries are bounded by what we asked; everything else
        # from one IP shares a token bucket, checked before any parsing work
        if src not in self._pending_by_addr and not self.limiter.allow(src[0]):
            c["rate_limited"] += 1
            return
        try:
            msg = krpc.parse(data)
        except KrpcError as e:
            c["malformed"] += 1
            if e.tid is not None:
                self._send_error(src, e.tid, e.code, e.msg, None)
            return
        if msg.kind != b"q":
            self.transactions.resolve(msg, src)
            return
        c["queries_in"] += 1
        name = msg.method.decode("ascii", "replace")
        self.methods_in[name if name in self.methods_in else "other"] += 1
        try:
            self._on_query(msg, src)
        except Exception:  # noqa: BLE001 - a bug in one handler must not stop the node
            c["handler_failed"] += 1
            log.exception("query handler failed")
            self._send_error(src, msg.tid, SERVER_ERROR, "server error", msg.topic)

    def _on_query(self, msg: Message, src: Addr) -> None:
        try:
            if msg.topic is not None:
                overlay = self.overlays.get(msg.topic)
                if overlay is None:
                    self.counters["unknown_topic"] += 1
                    raise KrpcError(PROTOCOL_ERROR, "not a member of this topic")
                values = overlay.handle_query(msg, src)
            else:
                values = self.handle_query(msg, src)
        except KrpcError as e:
            self._send_error(src, msg.tid, e.code, e.msg, msg.topic)
            return
        values[b"id"] = self.node_id
        # BEP 42's `ip` (the asker's address as we see it): compact form is IPv4 only
        self._send(src, krpc.encode_response(msg.tid, values, topic=msg.topic, version=VERSION,
                                             ip=src if ":" not in src[0] else None))

    def handle_query(self, msg: Message, src: Addr) -> dict[bytes, Any]:
        """The main DHT's answer to one query; KrpcError for an error answer."""
        a = msg.args
        sender = msg.sender_id
        if sender is not None and not a.get(b"ro"):  # read-only nodes are not routed to
            self.table.heard_from(sender, src)
        m = msg.method
        if m == b"ping":
            return {}
        if m == b"find_node":
            target = _id_arg(a, b"target")
            return {b"nodes": self.compact_closest(self.table, target)}
        if m == b"get_peers":
            ih = _id_arg(a, b"info_hash")
            r: dict[bytes, Any] = {b"token": self.tokens.make(src[0]),
                                   b"nodes": self.compact_closest(self.table, ih)}
            peers = self.peer_store.get(ih)
            if peers:
                r[b"values"] = [krpc.compact_peer(p) for p in peers]
            return r
        if m == b"announce_peer":
            ih = _id_arg(a, b"info_hash")
            self.check_token(src, a)
            port = a.get(b"port")
            if a.get(b"implied_port"):
                port = src[1]
            if not isinstance(port, int) or not 0 < port < 65536:
                raise KrpcError(PROTOCOL_ERROR, "bad port")
            self.peer_store.add(ih, (src[0], port))
            return {}
        if m == b"get":
            target = _id_arg(a, b"target")
            r = {b"token": self.tokens.make(src[0]),
                 b"nodes": self.compact_closest(self.table, target)}
            r.update(self.stored_fields(target, a.get(b"seq")))
            return r
        if m == b"put":
            self.check_token(src, a)
            if b"k" in a:
                item, cas = bep44.put_item(a)
                self.store.put_mutable(item, cas)
            else:
                if b"v" not in a:
                    raise KrpcError(PROTOCOL_ERROR, "missing v")
                v = bencode.encode(a[b"v"])
                if len(v) > bep44.MAX_V:
                    raise KrpcError(krpc.MESSAGE_TOO_BIG, "message (v field) too big")
                self.store.put_immutable(v)
            return {}
        raise KrpcError(METHOD_UNKNOWN, "method unknown")

    def stored_fields(self, target: bytes, seq: Any) -> dict[bytes, Any]:
        """A get answer's item fields: the mutable item unless the asker's seq is as new."""
        item = self.store.get_mutable(target)
        if item is not None:
            if isinstance(seq, int) and seq >= item.seq:
                return {b"seq": item.seq}
            return item.get_fields()
        v = self.store.immutable.get(target)
        if v is not None:
            return {b"v": bencode.decode(v)}
        return {}

    def check_token(self, src: Addr, a: dict[bytes, Any]) -> None:
        if not self.tokens.check(src[0], a.get(b"token")):
            self.counters["bad_token"] += 1
            raise KrpcError(PROTOCOL_ERROR, "invalid token")

    def compact_closest(self, table: RoutingTable, target: bytes, count: int = K) -> bytes:
        # BEP 5 nodes are IPv4; IPv6 entries would need `nodes6`
        return krpc.compact_nodes((n.id, n.addr) for n in table.closest(target, count)
                                  if ":" not in n.addr[0])

    # ---- sending ---------------------------------------------------------------------

    def _send(self, addr: Addr, data: bytes) -> None:
        if self.transport is None:
            return
        self.counters["tx_msgs"] += 1
        self.counters["tx_bytes"] += len(data)
        self.transport.sendto(data, addr)

    def _send_error(self, addr: Addr, tid: bytes, code: int, text: str,
                    topic: bytes | None) -> None:
        self.counters["errors_sent"] += 1
        self._send(addr, krpc.encode_error(tid, code, text, topic=topic, version=VERSION))

    def table_for(self, topic: bytes | None) -> RoutingTable | None:
        if topic is None:
            return self.table
        ov = self.overlays.get(topic)
        return ov.table if ov is not None else None

    async def query(self, addr: Addr, method: bytes, args: dict[bytes, Any], *,
                    topic: bytes | None = None,
                    timeout_s: float | None = None) -> Message | None:
        """Send one query and wait for its answer: a response or error Message, or None on
        timeout (or when too many queries are outstanding). The answering node is added to
        the routing table of the network asked (the main DHT or the topic's)."""
        if self.transport is None:
            return None
        try:
            tid, fut = self.transactions.open(addr, topic)
        except KrpcError:
            return None
        a = dict(args)
        a[b"id"] = self.node_id
        if self.read_only:
            a[b"ro"] = 1
        self._pending_by_addr[addr] = self._pending_by_addr.get(addr, 0) + 1
        try:
            self._send(addr, krpc.encode_query(tid, method, a, topic=topic, version=VERSION))
            try:
                reply = await asyncio.wait_for(fut, timeout_s or self.query_timeout_s)
            except TimeoutError:
                self.transactions.counters["timeouts"] += 1
                table = self.table_for(topic)
                if table is not None:
                    table.failed(addr)
                return None
        finally:
            self.transactions.close(tid, topic)
            n = self._pending_by_addr.get(addr, 1) - 1
            if n > 0:
                self._pending_by_addr[addr] = n
            else:
                self._pending_by_addr.pop(addr, None)
        if reply.kind == b"r" and reply.sender_id is not None:
            table = self.table_for(topic)
            if table is not None and not reply.args.get(b"ro"):
                table.heard_from(reply.sender_id, addr)
        return reply

    async def ping(self, addr: Addr, *, topic: bytes | None = None) -> bytes | None:
        """The node id answering at addr, or None."""
        r = await self.query(addr, b"ping", {}, topic=topic)
        return r.sender_id if r is not None and r.kind == b"r" else None

    # ---- iterative lookups -----------------------------------------------------------

    async def lookup(self, target: bytes, method: bytes = b"find_node", *,
                     topic: bytes | None = None, args: dict[bytes, Any] | None = None,
                     seeds: Iterable[Addr] = (), salt: bytes = b"",
                     key: bytes | None = None, k: int = K,
                     alpha: int = ALPHA) -> LookupResult:
        """Iterative Kademlia lookup of target with find_node, get_peers or get.

        For get with `key`, answers carrying the item (k, seq, sig, v) are checked against
        key/salt/signature and the newest is kept in the result.
        """
        table = self.table_for(topic)
        res = LookupResult()
        if table is None:
            return res
        qargs = dict(args or {})
        if method == b"get_peers":
            qargs[b"info_hash"] = target
        else:
            qargs[b"target"] = target
        t_int = int.from_bytes(target, "big")
        far = 1 << 161  # seeds whose id we do not know sort last
        cand: dict[Addr, int] = {}
        ids: dict[Addr, bytes] = {}
        for n in table.closest(target, k * 2):
            cand[n.addr] = distance(n.id, target)
            ids[n.addr] = n.id
        for s in seeds:
            cand.setdefault(s, far)
        asked: set[Addr] = set()
        answered: dict[Addr, Found] = {}
        peers: dict[Addr, None] = {}
        inflight: dict[asyncio.Task[Message | None], Addr] = {}

        def next_batch() -> list[Addr]:
            order = sorted(cand, key=lambda x: cand[x])
            # done once the k nearest known candidates were all asked
            top = order[:k]
            return [x for x in top if x not in asked]

        while True:
            for addr in next_batch():
                if len(inflight) >= alpha:
                    break
                asked.add(addr)
                task = asyncio.ensure_future(self.query(addr, method, qargs, topic=topic))
                inflight[task] = addr
            if not inflight:
                break
            done, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                addr = inflight.pop(task)
                res.queried += 1
                reply = task.result() if not task.cancelled() else None
                if reply is None or reply.kind != b"r" or reply.sender_id is None:
                    cand.pop(addr, None)
                    continue
                r = reply.args
                nid = reply.sender_id
                cand[addr] = distance(nid, target)
                tok = r.get(b"token")
                answered[addr] = Found(nid, addr, tok if isinstance(tok, bytes) else None)
                with contextlib.suppress(KrpcError):
                    for cid, caddr in krpc.parse_nodes(r.get(b"nodes", b"")):
                        if caddr not in cand and caddr not in asked and cid != self.node_id:
                            cand[caddr] = int.from_bytes(cid, "big") ^ t_int
                if method == b"get_peers":
                    vals = r.get(b"values")
                    if isinstance(vals, list):
                        for p in vals[:MAX_VALUES_REPLY]:
                            with contextlib.suppress(KrpcError, ValueError):
                                if isinstance(p, bytes):
                                    peers[krpc.parse_peer(p)] = None
                elif method == b"get" and key is not None and b"sig" in r:
                    try:
                        item = bep44.item_from_fields(r, salt)
                    except KrpcError:
                        continue  # a forged or broken item is not a lookup failure
                    if item.key == key and (res.item is None or item.seq > res.item.seq):
                        res.item = item
                elif method == b"get" and key is None and b"v" in r:
                    with contextlib.suppress(bencode.BencodeError):
                        v = bencode.encode(r[b"v"])
                        if bep44.immutable_target(v) == target:
                            res.immutable = v
            if len(cand) > MAX_SHORTLIST:  # keep the nearest; what was asked stays asked
                for x in sorted(cand, key=lambda x: cand[x])[MAX_SHORTLIST:]:
                    del cand[x]
        res.nodes = sorted(answered.values(), key=lambda f: distance(f.id, target))[:k]
        res.peers = list(peers)[:MAX_PEERS_PER_HASH]
        return res

    async def bootstrap(self, addrs: Iterable[Addr] | None = None) -> int:
        """Join the DHT through addrs (default: the configured bootstrap nodes): look up our
        own id. Returns the routing table's size."""
        seeds = list(addrs) if addrs is not None else self.bootstrap_addrs
        await self.lookup(self.node_id, b"find_node", seeds=seeds)
        return len(self.table)

    # ---- BEP 44 client -----------------------------------------------------------------

    async def get_mutable(self, key: bytes, salt: bytes = b"",
                          seq: int | None = None) -> bep44.MutableItem | None:
        """The newest item for (key, salt) found in the DHT, or what we hold if newer."""
        target = bep44.mutable_target(key, salt)
        args: dict[bytes, Any] = {} if seq is None else {b"seq": seq}
        res = await self.lookup(target, b"get", args=args, key=key, salt=salt)
        local = self.store.get_mutable(target)
        if local is not None and (res.item is None or local.seq >= res.item.seq):
            return local
        return res.item

    async def put_mutable(self, item: bep44.MutableItem, cas: int | None = None) -> int:
        """Store item on the k nodes nearest its target (and here). Returns how many nodes
        accepted it."""
        with contextlib.suppress(KrpcError):
            self.store.put_mutable(item)
        res = await self.lookup(item.target, b"get")
        return await self._put_to(res.nodes, item, cas)

    async def _put_to(self, nodes: list[Found], item: bep44.MutableItem,
                      cas: int | None) -> int:
        async def one(f: Found) -> bool:
            if f.token is None:
                return False
            r = await self.query(f.addr, b"put", item.put_args(self.node_id, f.token, cas))
            return r is not None and r.kind == b"r"

        oks = await asyncio.gather(*(one(f) for f in nodes))
        return sum(oks)

    async def get_peers(self, info_hash: bytes) -> LookupResult:
        return await self.lookup(info_hash, b"get_peers")

    async def announce(self, info_hash: bytes, port: int | None = None,
                       found: LookupResult | None = None) -> int:
        """announce_peer to the nodes nearest info_hash (port None: the DHT port, implied).
        Returns how many accepted."""
        res = found if found is not None else await self.get_peers(info_hash)
        args: dict[bytes, Any] = {b"info_hash": info_hash}
        if port is None:
            args[b"implied_port"] = 1
            args[b"port"] = self.port
        else:
            args[b"port"] = port

        async def one(f: Found) -> bool:
            if f.token is None:
                return False
            r = await self.query(f.addr, b"announce_peer", {**args, b"token": f.token})
            return r is not None and r.kind == b"r"

        return sum(await asyncio.gather(*(one(f) for f in res.nodes)))

    def stats(self) -> dict[str, int]:
        """Counters of the node and its tables, for logs and benchmarks."""
        out = dict(self.counters)
        out.update({"rate_limited_sources": len(self.limiter), "table": len(self.table),
                    "items": len(self.store), "pending": len(self.transactions),
                    "timeouts": self.transactions.counters["timeouts"]})
        return out


def _id_arg(a: dict[bytes, Any], name: bytes) -> bytes:
    v = a.get(name)
    if not isinstance(v, bytes) or len(v) != 20:
        raise KrpcError(PROTOCOL_ERROR, "%s must be a 20-byte string" % name.decode())
    return v

