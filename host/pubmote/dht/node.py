"""An asyncio UDP node of the BitTorrent DHT (BEP 5) with BEP 44 storage.

It answers ping, find_node, get_peers, announce_peer, get and put (server.py); it runs
iterative lookups (find_node, get_peers, get: lookup.py) and puts; it bootstraps from given
addresses. Every table is bounded and counts what it drops; queries are rate-limited per
source address (ratelimit.py). BEP 50 topic overlays (bep50.py) share the socket, the node
id and the token secret: messages carrying `c` are handed to the overlay for that topic.
The node itself keeps the socket, the transactions of its own queries, the tables and the
BEP 44 client calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any, Protocol, cast

from pubmote.dht import bep44, krpc
from pubmote.dht.krpc import (
    PROTOCOL_ERROR,
    SERVER_ERROR,
    Addr,
    KrpcError,
    Message,
)
from pubmote.dht.lookup import ALPHA, Found, LookupResult, lookup
from pubmote.dht.peerstore import PeerStore
from pubmote.dht.ratelimit import RateLimiter
from pubmote.dht.routing import K, RoutingTable, random_id
from pubmote.dht.server import QueryServer

log = logging.getLogger("pubmote.dht")

VERSION = b"PM\x00\x01"  # client version in every message (BEP 5 `v`): pubmote 0.1
MAX_DATAGRAM = 8192  # DHT messages fit in one unfragmented datagram; larger are dropped
REFRESH_S = 15 * 60.0  # BEP 5: buckets unchanged for 15 minutes are refreshed
_METHODS = ("ping", "find_node", "get_peers", "announce_peer", "get", "put")


class Overlay(Protocol):
    """What the node needs of a BEP 50 topic network (see bep50.TopicOverlay)."""

    target: bytes
    table: RoutingTable

    def handle_query(self, msg: Message, addr: Addr) -> dict[bytes, Any]: ...


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
        self.methods_in: dict[str, int] = dict.fromkeys((*_METHODS, "other"), 0)
        self.counters: dict[str, int] = {
            "rx_msgs": 0, "rx_bytes": 0, "tx_msgs": 0, "tx_bytes": 0, "queries_in": 0,
            "oversize": 0, "malformed": 0, "rate_limited": 0, "errors_sent": 0,
            "bad_token": 0, "unknown_topic": 0, "handler_failed": 0, "rx_failed": 0}
        self.server = QueryServer(table=self.table, store=self.store,
                                  peer_store=self.peer_store, tokens=self.tokens,
                                  counters=self.counters)

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
            except Exception:  # upkeep must outlive any one failure
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
        except Exception:  # nothing a peer sends may stop the node
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
        except Exception:  # a bug in one handler must not stop the node
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
                values = self.server.handle(msg, src)
        except KrpcError as e:
            self._send_error(src, msg.tid, e.code, e.msg, msg.topic)
            return
        values[b"id"] = self.node_id
        # BEP 42's `ip` (the asker's address as we see it): compact form is IPv4 only
        self._send(src, krpc.encode_response(msg.tid, values, topic=msg.topic, version=VERSION,
                                             ip=src if ":" not in src[0] else None))

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
        """Iterative Kademlia lookup of target with find_node, get_peers or get, in the
        main DHT or `topic`'s overlay (lookup.py).

        For get with `key`, answers carrying the item (k, seq, sig, v) are checked against
        key/salt/signature and the newest is kept in the result.
        """
        table = self.table_for(topic)
        if table is None:
            return LookupResult()
        return await lookup(self._ask, table, self.node_id, target, method, topic=topic,
                            args=args, seeds=seeds, salt=salt, key=key, k=k, alpha=alpha)

    async def _ask(self, addr: Addr, method: bytes, args: dict[bytes, Any],
                   topic: bytes | None) -> Message | None:
        return await self.query(addr, method, args, topic=topic)

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
