"""BEP 50: publish/subscribe over the DHT, one overlay network per topic.

A topic is a BEP 44 mutable item; its overlay is a DHT of its own in which every message
carries `c` = the item's target, K = 1 except the home bucket and its sibling (8 nodes
each), `get_peers`/`announce_peer` are refused, and `get`/`put` are only for the topic's
item. A valid put with a higher seq is stored and forwarded to every node of the topic's
routing table by new queries, as if this node had originated it. Nodes join by
`get_peers` on the main DHT for the target and announce themselves there. Each overlay
shares the node's socket and node id (one id across topics on one address).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from pubmote.dht import bep44, krpc
from pubmote.dht.krpc import METHOD_UNKNOWN, PROTOCOL_ERROR, Addr, KrpcError, Message
from pubmote.dht.node import DhtNode
from pubmote.dht.routing import RoutingTable
from pubmote.dht.server import compact_closest

log = logging.getLogger("pubmote.dht.bep50")

TOPIC_K = 1  # BEP 50: K is one
HOME_K = 8  # ... but the home bucket and its sibling hold at least 8 nodes
TOKEN_TTL_S = 240.0  # peers' tokens live 5-10 min; reuse one for 4 min, then ask again
# routing table upkeep (find_node on our own id), and a get with our seq to every member:
# a member that missed a put (its network away) catches up without waiting for the next
REFRESH_S = 60.0
# a member a put could not reach is sent the topic's current item again after these
# delays (s), then left to its own upkeep
CATCH_UP_S = (1.0, 3.0, 9.0, 27.0)
MAX_BEHIND = 4 * HOME_K * 20
REANNOUNCE_S = 15 * 60.0  # announce_peer on the main DHT, as torrents do

UpdateCallback = Callable[[bep44.MutableItem], None]


class TopicOverlay:
    """This node's membership in one topic's overlay.

    `on_update(item)` is called for every newer item: pushed by a put, found while joining,
    or published here.
    """

    def __init__(self, node: DhtNode, key: bytes, salt: bytes = b"", *,
                 on_update: UpdateCallback | None = None, home_k: int = HOME_K,
                 refresh_s: float = REFRESH_S,
                 catch_up_s: tuple[float, ...] = CATCH_UP_S) -> None:
        if len(salt) > bep44.MAX_SALT:
            raise ValueError("salt of %d bytes; BEP 44 allows %d" % (len(salt), bep44.MAX_SALT))
        self.node = node
        self.key = key
        self.salt = salt
        self.target = bep44.mutable_target(key, salt)
        self.table = RoutingTable(node.node_id, k=TOPIC_K, home_k=home_k)
        self.item: bep44.MutableItem | None = None
        self.on_update = on_update
        self._tokens: dict[Addr, tuple[bytes, float]] = {}
        self._upkeep: asyncio.Task[None] | None = None
        self._forwarding: asyncio.Task[int] | None = None
        self.refresh_s = refresh_s
        self.catch_up_s = catch_up_s
        self._behind: set[Addr] = set()  # members the last forward did not reach
        self._catching_up: asyncio.Task[None] | None = None
        self.counters = {"puts_in": 0, "puts_newer": 0, "forwards": 0, "forward_failed": 0,
                         "refused": 0, "joins": 0, "superseded": 0, "catch_up_puts": 0,
                         "caught_up": 0, "upkeep_failed": 0}

    # ---- membership ------------------------------------------------------------------

    def attach(self) -> None:
        """Start answering this topic's messages on the node."""
        if self.target not in self.node.overlays:
            if len(self.node.overlays) >= self.node.max_topics:
                raise ValueError("this node is in %d topics already" % self.node.max_topics)
            self.node.overlays[self.target] = self

    async def join(self, *, seeds: list[Addr] | None = None, announce: bool = True) -> int:
        """Join the overlay: find members with get_peers on the main DHT (or use seeds),
        announce ourselves there, meet the members, and fetch the topic's latest item.
        Returns the size of the topic's routing table."""
        self.attach()
        self.counters["joins"] += 1
        members: list[Addr] = list(seeds or [])
        if seeds is None:
            # the item on the main DHT too (BEP 44): a publisher that put it there without
            # being a member still gives a late joiner the last value at once
            found, stored = await asyncio.gather(
                self.node.get_peers(self.target),
                self.node.lookup(self.target, b"get", key=self.key, salt=self.salt))
            if stored.item is not None:
                self._accept(stored.item)
            members = [p for p in found.peers if p != self.node.addr]
            if announce:
                await self.node.announce(self.target, found=found)
        # meet every member we were told of: they add us to their tables as we add them
        await asyncio.gather(*(self.node.ping(m, topic=self.target) for m in members))
        # fill the home bucket: a lookup of our own id inside the overlay
        await self.node.lookup(self.node.node_id, b"find_node", topic=self.target)
        await self.fetch()
        if self._upkeep is None:
            self._upkeep = self.node.spawn(self._maintain(announce and seeds is None))
        return len(self.table)

    async def fetch(self) -> bep44.MutableItem | None:
        """Ask every member for the item (with our seq: only newer ones come back); keeps
        their write tokens for later forwards."""
        async def one(addr: Addr) -> None:
            args: dict[bytes, Any] = {b"target": self.target}
            if self.item is not None:
                args[b"seq"] = self.item.seq
            r = await self.node.query(addr, b"get", args, topic=self.target)
            if r is None or r.kind != b"r":
                return
            self._keep_token(addr, r.args.get(b"token"))
            if b"sig" in r.args:
                with contextlib.suppress(KrpcError):
                    item = bep44.item_from_fields(r.args, self.salt)
                    if item.key == self.key:
                        self._accept(item)

        await asyncio.gather(*(one(n.addr) for n in self.table.nodes()))
        return self.item

    async def _maintain(self, reannounce: bool) -> None:
        last_announce = time.monotonic()
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.node.lookup(self.node.node_id, b"find_node", topic=self.target)
                await self.fetch()  # only newer items come back: cheap when up to date
                if reannounce and time.monotonic() - last_announce > REANNOUNCE_S:
                    await self.node.announce(self.target)
                    last_announce = time.monotonic()
            except Exception:  # the next round tries again
                self.counters["upkeep_failed"] += 1
                log.debug("topic upkeep failed", exc_info=True)

    def leave(self) -> None:
        self.node.overlays.pop(self.target, None)
        for t in (self._upkeep, self._catching_up):
            if t is not None:
                t.cancel()
        self._upkeep = self._catching_up = None

    # ---- publishing ------------------------------------------------------------------

    async def publish(self, item: bep44.MutableItem) -> int:
        """Publish a newer item (signed by the topic's key) to every node of the topic's
        routing table. Returns how many accepted it."""
        if item.target != self.target:
            raise ValueError("the item is not this topic's")
        if self.item is not None and item.seq <= self.item.seq:
            raise ValueError("seq %d is not newer than %d" % (item.seq, self.item.seq))
        self._accept(item)
        return await self._forward(item, exclude=None)

    async def _forward(self, item: bep44.MutableItem, exclude: Addr | None) -> int:
        nodes = [n.addr for n in self.table.nodes() if n.addr != exclude]
        oks = await asyncio.gather(*(self._put_one(a, item) for a in nodes))
        missed = {a for a, ok in zip(nodes, oks, strict=True) if not ok}
        if missed and self.catch_up_s:
            if len(self._behind) + len(missed) > MAX_BEHIND:
                self._behind.clear()  # bounded: those left to their own upkeep
            self._behind |= missed
            if self._catching_up is None or self._catching_up.done():
                self._catching_up = self.node.spawn(self._catch_up())
        return sum(oks)

    async def _catch_up(self) -> None:
        """Send the current item again to the members a forward missed, after each delay
        of catch_up_s, until each took it (or has a newer one); the rest are left to
        their own upkeep's fetch. One task per topic, always with the newest item."""
        for delay in self.catch_up_s:
            await asyncio.sleep(delay)
            item = self.item
            if item is None or not self._behind:
                break
            addrs = list(self._behind)
            self.counters["catch_up_puts"] += len(addrs)
            oks = await asyncio.gather(*(self._put_one(a, item) for a in addrs))
            for a, ok in zip(addrs, oks, strict=True):
                if ok:
                    self._behind.discard(a)
                    self.counters["caught_up"] += 1
        self._behind.clear()

    async def _put_one(self, addr: Addr, item: bep44.MutableItem) -> bool:
        for attempt in range(2):
            token = self._token(addr)
            if token is None:
                r = await self.node.query(addr, b"get", {b"target": self.target,
                                                         b"seq": item.seq},
                                          topic=self.target)
                if r is None or r.kind != b"r":
                    break
                token = self._keep_token(addr, r.args.get(b"token"))
                if token is None:
                    break
                if isinstance(r.args.get(b"seq"), int) and r.args[b"seq"] >= item.seq:
                    return True  # it has this value already (from another member)
            self.counters["forwards"] += 1
            r = await self.node.query(addr, b"put", item.put_args(self.node.node_id, token),
                                      topic=self.target)
            if r is None:
                break
            if r.kind == b"r":
                return True
            code, _ = r.error()
            if code in (krpc.SEQ_TOO_LOW, krpc.CAS_MISMATCH):
                return True  # it has a value at least as new
            self._tokens.pop(addr, None)  # a stale token: ask again once
            if attempt:
                break
        self.counters["forward_failed"] += 1
        return False

    def _token(self, addr: Addr) -> bytes | None:
        t = self._tokens.get(addr)
        if t is None or time.monotonic() - t[1] > TOKEN_TTL_S:
            return None
        return t[0]

    def _keep_token(self, addr: Addr, token: Any) -> bytes | None:
        if not isinstance(token, bytes) or len(token) > 64:
            return None
        if len(self._tokens) >= 4 * HOME_K * 20 and addr not in self._tokens:
            # bounded: drop tokens of nodes no longer in the table
            for a in [a for a in self._tokens if a not in self.table.by_addr]:
                del self._tokens[a]
            if len(self._tokens) >= 4 * HOME_K * 20:
                return token
        self._tokens[addr] = (token, time.monotonic())
        return token

    def _accept(self, item: bep44.MutableItem) -> bool:
        if self.item is not None and item.seq <= self.item.seq:
            return False
        self.item = item
        # the overlay node stores the topic's item: `get` on the main DHT finds it here too
        with contextlib.suppress(KrpcError):
            self.node.store.put_mutable(item)
        if self.on_update is not None:
            try:
                self.on_update(item)
            except Exception:  # a subscriber's bug must not stop forwarding
                log.exception("topic update callback failed")
        return True

    # ---- answering -------------------------------------------------------------------

    def handle_query(self, msg: Message, src: Addr) -> dict[bytes, Any]:
        """The answer to one query of this topic's network (`c` = our target)."""
        a = msg.args
        sender = msg.sender_id
        if sender is not None and not a.get(b"ro"):  # BEP 43 read-only: not a member
            self.table.heard_from(sender, src)
        m = msg.method
        if m == b"ping":
            return {}
        if m == b"find_node":
            target = a.get(b"target")
            if not isinstance(target, bytes) or len(target) != 20:
                raise KrpcError(PROTOCOL_ERROR, "target must be a 20-byte string")
            return {b"nodes": compact_closest(self.table, target)}
        if m in (b"get_peers", b"announce_peer"):
            self.counters["refused"] += 1
            raise KrpcError(METHOD_UNKNOWN, "%s is not allowed in a topic network"
                            % m.decode())
        if m == b"get":
            if a.get(b"target") != self.target:
                self.counters["refused"] += 1
                raise KrpcError(PROTOCOL_ERROR, "only the topic's item is served here")
            r: dict[bytes, Any] = {b"token": self.node.tokens.make(src[0]),
                                   b"nodes": compact_closest(self.table, self.target)}
            if self.item is not None:
                seq = a.get(b"seq")
                if isinstance(seq, int) and seq >= self.item.seq:
                    r[b"seq"] = self.item.seq
                else:
                    r.update(self.item.get_fields())
            return r
        if m == b"put":
            self.node.server.check_token(src, a)
            if b"k" not in a:
                self.counters["refused"] += 1
                raise KrpcError(PROTOCOL_ERROR, "only the topic's mutable item is accepted")
            item, cas = bep44.put_item(a)
            if item.target != self.target:
                self.counters["refused"] += 1
                raise KrpcError(PROTOCOL_ERROR, "only the topic's item is accepted")
            self.counters["puts_in"] += 1
            bep44.check_replace(self.item, item, cas)  # 301 / 302 as BEP 44 says
            if self._accept(item):
                self.counters["puts_newer"] += 1
                if self._forwarding is not None and not self._forwarding.done():
                    # a newer value supersedes the one still being forwarded: one forward
                    # per topic at a time, so a fast publisher cannot pile up tasks here
                    self._forwarding.cancel()
                    self.counters["superseded"] += 1
                self._forwarding = self.node.spawn(self._forward(item, exclude=src))
            return {}
        raise KrpcError(METHOD_UNKNOWN, "method unknown")


async def subscribe(node: DhtNode, key: bytes, salt: bytes = b"", *,
                    on_update: UpdateCallback | None = None,
                    seeds: list[Addr] | None = None) -> TopicOverlay:
    """Join the topic (key, salt) on node; on_update gets every newer item."""
    ov = TopicOverlay(node, key, salt, on_update=on_update)
    await ov.join(seeds=seeds)
    return ov
