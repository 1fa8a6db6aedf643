"""GossipSub v1.1 router on the asyncio libp2p host (libp2p/specs pubsub/gossipsub):
subscriptions, mesh maintenance, fanout, IHAVE/IWANT gossip from a message cache,
GRAFT/PRUNE with backoff, a seen cache, StrictSign signing and verification, validators,
a simple peer score with graylisting, and IDONTWANT (v1.2) for large messages.

Speaks /meshsub/1.2.0, /meshsub/1.1.0, /meshsub/1.0.0 and /floodsub/1.0.0; floodsub peers
get every message of the topics they subscribe to.

    ps = GossipSub(host)
    async with ps:
        ps.subscribe("/realm/cat/topic", on_message)     # on_message(GossipMessage)
        msg_id = await ps.publish("/realm/cat/topic", b"payload")

Our own published messages are NOT delivered to our own subscribers (as in go-libp2p and
js-libp2p); a caller that wants its own copy delivers it itself.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from collections.abc import Awaitable

from pubmote.p2p.errors import ProtocolError
from pubmote.p2p.host import Host
from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import (
    FLOODSUB,
    MESHSUB_10,
    MESHSUB_11,
    MESHSUB_12,
    PROTOCOLS,
    GossipConfig,
    PublishRejected,
)
from pubmote.p2p.pubsub.control import ControlHandler
from pubmote.p2p.pubsub.gossip import Gossip
from pubmote.p2p.pubsub.heartbeat import Heartbeat
from pubmote.p2p.pubsub.links import PeerLinks
from pubmote.p2p.pubsub.mesh import Mesh
from pubmote.p2p.pubsub.messages import (
    ACCEPT,
    IGNORE,
    REJECT,
    THROTTLE,
    GossipMessage,
    Handler,
    Validator,
    default_msg_id,
    verify_signature,
)
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import RPC, SIGN_PREFIX, Message, frame
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import PeerState, SeenCache
from pubmote.p2p.pubsub.validation import Validators

log = logging.getLogger("pubmote.p2p.pubsub")

__all__ = ["ACCEPT", "FLOODSUB", "IGNORE", "MESHSUB_10", "MESHSUB_11", "MESHSUB_12",
           "PROTOCOLS", "REJECT", "THROTTLE", "GossipConfig", "GossipMessage", "GossipSub",
           "PublishRejected", "default_msg_id", "verify_signature"]


class GossipSub:
    """A GossipSub router on `host`. Use `await start()`/`await stop()` or `async with`.

    It keeps the subscriptions and their handlers, and takes each message through the
    seen cache, signature check and validators to delivery; its parts, each with its own
    state, do the rest: the peers and their queues (PeerTable), their streams
    (PeerLinks), scores (PeerScores), mesh and fanout (Mesh), gossip and the message
    cache (Gossip), control messages (ControlHandler), the heartbeat (Heartbeat),
    validators (Validators)."""

    def __init__(self, host: Host, config: GossipConfig | None = None) -> None:
        self.host = host
        self.config = c = config or GossipConfig()
        c.check()
        self._msg_id = c.msg_id_fn or default_msg_id
        self._default_id = c.msg_id_fn is None
        self.counters: dict[str, int] = dict.fromkeys((
            "received", "delivered", "duplicates", "invalid", "invalid_signature",
            "rejected", "ignored", "throttled", "not_subscribed", "published",
            "published_no_peers", "forwarded", "dropped_queue_full", "dropped_handlers",
            "handler_errors", "validator_errors", "graylisted_rpcs", "malformed_rpcs",
            "iwant_sent", "iwant_served", "ihave_sent", "graft_sent", "prune_sent",
            "graft_received", "prune_received", "broken_promises", "idontwant_sent",
            "idontwant_received", "idontwant_skipped", "px_ignored", "seen_evicted",
            "subscription_limit"), 0)
        n = self.counters
        rng = random.Random(c.seed)
        self._peers = PeerTable(c, n)
        self._scores = PeerScores(c, self._peers.__contains__)
        self._seen = SeenCache(c.max_seen, c.seen_ttl_s, n)
        self._mesh = Mesh(config=c, host=host, peers=self._peers, scores=self._scores,
                          rng=rng, counters=n)
        self._gossip = Gossip(config=c, peers=self._peers, mesh=self._mesh,
                              scores=self._scores, seen=self._seen, rng=rng, counters=n)
        self._heartbeat = Heartbeat(config=c, peers=self._peers, mesh=self._mesh,
                                    gossip=self._gossip, scores=self._scores, seen=self._seen)
        self._control = ControlHandler(config=c, peers=self._peers, mesh=self._mesh,
                                       gossip=self._gossip, scores=self._scores,
                                       clock=self._heartbeat_count, counters=n)
        self._validators = Validators(n)
        self._links = PeerLinks(host=host, config=c, peers=self._peers, scores=self._scores,
                                mesh=self._mesh, counters=n, hello=self._hello,
                                on_rpc=self._handle_rpc, spawn=self._spawn,
                                running=self._is_running)
        self._subs: dict[str, Handler] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._handler_tasks: set[asyncio.Task[None]] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._seqno = time.time_ns()
        self._running = False

    def _heartbeat_count(self) -> int:
        return self._heartbeat.count

    def _is_running(self) -> bool:
        return self._running

    def _hello(self) -> bytes | None:
        if not self._subs:
            return None
        return frame(RPC(subscriptions=[(True, t) for t in self._subs]).encode())

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- lifetime ------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        for proto in self.config.protocols:
            self.host.set_stream_handler(proto, self._links.handle_stream)
        self.host.add_event_handler(self._links.on_peer_event)
        for peer in self.host.connected_peers():
            self._links.add_peer(peer)
        self._heartbeat_task = asyncio.ensure_future(self._heartbeat.run())

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.host.remove_event_handler(self._links.on_peer_event)
        for proto in self.config.protocols:
            self.host.remove_stream_handler(proto)
        tasks: list[asyncio.Task[None]] = list(self._tasks) + list(self._handler_tasks)
        if self._heartbeat_task is not None:
            tasks.append(self._heartbeat_task)
        for ps in list(self._peers):
            self._links.remove_peer(ps.peer_id, reset=True)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)

    async def __aenter__(self) -> GossipSub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- public API ----------------------------------------------------------------------
    @property
    def peer_id(self) -> PeerId:
        return self.host.peer_id

    def subscribe(self, topic: str, handler: Handler) -> None:
        """Join `topic`: `handler(msg)` (sync or async) gets each new message from others.

        Subscribing again replaces the handler.
        """
        new = topic not in self._subs
        self._subs[topic] = handler
        if not new:
            return
        self._announce(topic, True)
        self._mesh.join(topic)

    def unsubscribe(self, topic: str) -> None:
        """Leave `topic`: PRUNE our mesh peers and tell everyone."""
        if self._subs.pop(topic, None) is None:
            return
        self._announce(topic, False)
        self._mesh.leave(topic)

    def subscriptions(self) -> list[str]:
        return sorted(self._subs)

    async def publish(self, topic: str, data: bytes) -> bytes:
        """Sign and send `data` on `topic`; return its message id.

        Not delivered to our own subscribers. When no peer could take it the id is still
        returned and `counters["published_no_peers"]` counts it. Local validators run on
        it too (as in go-libp2p): PublishRejected when one does not accept it. ValueError
        when it exceeds max_transmit_size.
        """
        self._seqno += 1
        seqno = self._seqno.to_bytes(8, "big")
        me = self.host.peer_id
        msg = Message(from_=me.raw, data=bytes(data), seqno=seqno, topic=topic)
        if self.config.sign:
            msg.signature = self.host.key.sign(SIGN_PREFIX + msg.unsigned_bytes())
            if me.inline_key() is None:
                msg.key = self.host.key.public.encode()
            msg.raw = msg.encode()
        if len(msg.raw) + 16 > self.config.max_transmit_size:
            raise ValueError("message of %d bytes exceeds max_transmit_size" % len(msg.raw))
        gm = GossipMessage(topic, msg.data, me, seqno, b"", None, msg.signature, msg.key)
        mid = self._msg_id(gm)
        gm.msg_id = mid
        if self._validators.covers(topic):
            result = await self._validators.validate(gm)
            if result != ACCEPT:
                raise PublishRejected("local validator said %s" % result)
        self._seen.mark(mid)
        self._gossip.put(mid, msg)
        targets = self._mesh.publish_targets(topic)
        data_frame = frame(RPC(publish=[msg]).encode())
        for ps in targets:
            self._peers.enqueue(ps, data_frame)
        self.counters["published"] += 1
        if not targets:
            self.counters["published_no_peers"] += 1
        return mid

    def peers(self, topic: str | None = None) -> list[PeerId]:
        """Pubsub peers we have a stream with (that subscribe to `topic`, if given)."""
        if topic is None:
            return [ps.peer_id for ps in self._peers if ps.proto]
        return [p for p in self._peers.subscribers(topic) if p in self._peers]

    def mesh_peers(self, topic: str) -> list[PeerId]:
        return self._mesh.mesh_peers(topic)

    def fanout_peers(self, topic: str) -> list[PeerId]:
        return self._mesh.fanout_peers(topic)

    def score(self, peer: PeerId) -> float:
        """The peer's score (0 when unknown); see GossipConfig for the weights."""
        return self._scores.score(peer)

    def peer_throttled(self, peer: PeerId) -> int:
        ps = self._peers.get(peer)
        return ps.throttled if ps is not None else 0

    @property
    def heartbeats(self) -> int:
        """Heartbeats run since start: the router's clock for backoffs, caches and scores."""
        return self._heartbeat.count

    def heartbeat(self) -> None:
        """One round of maintenance (runs every heartbeat_s; public for tests)."""
        self._heartbeat.beat()

    def set_validator(self, topic: str, fn: Validator, *, prefix: bool = False) -> None:
        """Validate messages on `topic` (or on every topic starting with it when `prefix`).

        `fn(msg)` returns (or resolves to) "accept", "reject" (dropped, the forwarding
        peer is penalised), "ignore" (dropped, no penalty) or "throttle" (not standard
        libp2p: dropped like "ignore" and counted against the forwarding peer in
        `counters["throttled"]` and its per-peer throttle count, without penalty). When
        several validators match, the strictest result wins. An exception counts as
        "ignore". Take one away with `remove_validator`.
        """
        self._validators.add(topic, fn, prefix=prefix)

    def remove_validator(self, topic: str, *, prefix: bool = False) -> None:
        self._validators.remove(topic, prefix=prefix)

    async def _handle_rpc(self, ps: PeerState, rpc: RPC) -> None:
        peer = ps.peer_id
        if self._scores.score(peer) < self.config.graylist_threshold:
            self.counters["graylisted_rpcs"] += 1
            return
        for sub, topic in rpc.subscriptions:
            self._on_subscription(ps, sub, topic)
        for msg in rpc.publish:
            await self._handle_message(ps, msg)
            if ps.closed:
                return
        if rpc.control is not None:
            self._control.handle(ps, rpc.control)

    def _on_subscription(self, ps: PeerState, sub: bool, topic: str) -> None:
        if sub:
            self._peers.subscribe(ps, topic)
        elif self._peers.unsubscribe(ps, topic):
            self._mesh.drop_peer(ps.peer_id, topic)

    # -- messages ------------------------------------------------------------------------
    async def _handle_message(self, ps: PeerState, msg: Message) -> None:
        c = self.counters
        c["received"] += 1
        src = ps.peer_id
        if msg.from_ is None or msg.seqno is None:
            c["invalid"] += 1
            self._scores.penalise_invalid(src, "unsigned message without from/seqno")
            return
        if self._default_id and msg.from_ + msg.seqno in self._seen:
            # Most copies a router gets are duplicates: drop them before any parsing.
            c["duplicates"] += 1
            self._gossip.arrived(msg.from_ + msg.seqno)
            return
        try:
            origin = PeerId(msg.from_)
        except ProtocolError:
            c["invalid"] += 1
            self._scores.penalise_invalid(src, "message with a bad from field")
            return
        gm = GossipMessage(msg.topic, msg.data, origin, msg.seqno, b"", src, msg.signature,
                           msg.key)
        try:
            mid = self._msg_id(gm)
        except Exception:
            c["invalid"] += 1
            log.exception("gossipsub: message id function failed")
            return
        gm.msg_id = mid
        if mid in self._seen:
            c["duplicates"] += 1
            self._gossip.arrived(mid)
            return
        if msg.topic not in self._subs:
            c["not_subscribed"] += 1
            return
        # Seen before validation: a message is validated once, however many peers send it.
        self._seen.mark(mid)
        self._gossip.arrived(mid)
        if origin == self.host.peer_id:
            c["duplicates"] += 1  # our own message came back after the seen cache forgot it
            return
        if not verify_signature(msg, origin):
            c["invalid"] += 1
            c["invalid_signature"] += 1
            self._scores.penalise_invalid(src, "invalid signature")
            return
        if self._validators.covers(msg.topic):
            result = await self._validators.validate(gm)
            if result != ACCEPT:
                if result == REJECT:
                    c["rejected"] += 1
                    self._scores.penalise_invalid(src, "message rejected by a validator")
                elif result == THROTTLE:
                    c["throttled"] += 1
                    ps.throttled += 1
                else:
                    c["ignored"] += 1
                return
        self._gossip.put(mid, msg)
        self._mesh.forward(msg, mid, src, origin)
        self._deliver(gm)

    def _deliver(self, gm: GossipMessage) -> None:
        handler = self._subs.get(gm.topic)
        if handler is None:
            return
        self.counters["delivered"] += 1
        try:
            res = handler(gm)
        except Exception:
            self.counters["handler_errors"] += 1
            log.exception("gossipsub: subscriber of %s failed", gm.topic)
            return
        if res is not None and inspect.isawaitable(res):
            if len(self._handler_tasks) >= self.config.max_pending_handlers:
                self.counters["dropped_handlers"] += 1
                if inspect.iscoroutine(res):
                    res.close()
                return
            t = asyncio.ensure_future(self._run_handler(res, gm.topic))
            self._handler_tasks.add(t)
            t.add_done_callback(self._handler_tasks.discard)

    async def _run_handler(self, aw: Awaitable[None], topic: str) -> None:
        try:
            await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            self.counters["handler_errors"] += 1
            log.exception("gossipsub: subscriber of %s failed", topic)

    # -- subscriptions ---------------------------------------------------------------------
    def _announce(self, topic: str, sub: bool) -> None:
        data = frame(RPC(subscriptions=[(sub, topic)]).encode())
        for ps in self._peers:
            if ps.stream is not None:  # before that, the hello carries it
                self._peers.enqueue(ps, data)
