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
import math
import random
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from pubmote.p2p.errors import MeshError, NegotiationError, ProtocolError, StreamReset
from pubmote.p2p.host import CONNECTED, DISCONNECTED, IDENTIFIED, Host, PeerEvent, describe
from pubmote.p2p.identity import PeerId, PublicKey
from pubmote.p2p.pubsub.rpc import RPC, SIGN_PREFIX, Control, Message, Prune, frame
from pubmote.p2p.yamux import Stream

log = logging.getLogger(__name__)

MESHSUB_12 = "/meshsub/1.2.0"
MESHSUB_11 = "/meshsub/1.1.0"
MESHSUB_10 = "/meshsub/1.0.0"
FLOODSUB = "/floodsub/1.0.0"
PROTOCOLS = (MESHSUB_12, MESHSUB_11, MESHSUB_10, FLOODSUB)

ACCEPT = "accept"
REJECT = "reject"
IGNORE = "ignore"
THROTTLE = "throttle"
_RANK = {ACCEPT: 0, IGNORE: 1, THROTTLE: 2, REJECT: 3}   # the strictest result wins

Handler = Callable[["GossipMessage"], Awaitable[None] | None]
Validator = Callable[["GossipMessage"], str | Awaitable[str]]
MsgIdFn = Callable[["GossipMessage"], bytes]


class PublishRejected(ValueError):
    """A local validator did not accept a message we were about to publish."""


@dataclass
class GossipConfig:
    """Router parameters (seed 002's defaults; the spec's names with units)."""

    D: int = 6
    D_low: int = 4
    D_high: int = 12
    D_lazy: int = 6
    D_score: int = 4                     # kept by score when pruning an oversized mesh
    heartbeat_s: float = 1.0
    heartbeat_initial_delay_s: float = 0.1
    fanout_ttl_s: float = 60.0
    mcache_len: int = 5                  # heartbeats a message stays in the cache
    mcache_gossip: int = 3               # heartbeats of it we gossip about
    seen_ttl_s: float = 120.0
    max_seen: int = 200_000              # bound of the seen cache (oldest go first)
    prune_backoff_s: float = 60.0
    unsubscribe_backoff_s: float = 10.0
    graft_flood_threshold_s: float = 10.0
    gossip_factor: float = 0.25
    gossip_retransmission: int = 3       # IWANT answers per message per peer
    max_ihave_length: int = 5000         # ids asked for per peer per heartbeat
    max_ihave_messages: int = 10         # IHAVEs heeded per peer per heartbeat
    iwant_followup_s: float = 3.0        # promise deadline for an IWANT we sent
    max_transmit_size: int = 1 << 20
    flood_publish: bool = True
    max_queue: int = 4096                # outbound RPC frames queued per peer
    max_write_batch_bytes: int = 256 * 1024
    max_pending_handlers: int = 1024     # async subscriber callbacks in flight
    max_topics_per_peer: int = 1024
    max_peers: int = 1024
    idontwant_min_bytes: int = 1024      # send IDONTWANT for messages at least this big
    max_idontwant: int = 2000            # remembered per peer
    idontwant_ttl_heartbeats: int = 3
    protocols: tuple[str, ...] = PROTOCOLS
    sign: bool = True                    # StrictSign; False publishes unsigned (tests only)
    # -- peer score (a simple subset of v1.1 scoring) --
    invalid_message_weight: float = -10.0   # times the square of the counter
    behaviour_penalty_weight: float = -10.0  # broken promises, GRAFT in backoff
    behaviour_penalty_threshold: float = 0.0
    score_decay: float = 0.995               # per heartbeat, for both counters
    gossip_threshold: float = -10.0          # below: no gossip to/from the peer
    publish_threshold: float = -50.0         # below: no flood publishing to the peer
    graylist_threshold: float = -80.0        # below: every RPC from it is ignored
    retain_score_s: float = 600.0
    max_scores: int = 4096
    msg_id_fn: MsgIdFn | None = None         # default: from + seqno
    seed: int | None = None                  # for the random choices (tests)

    def check(self) -> None:
        if not (0 < self.D_low <= self.D <= self.D_high):
            raise ValueError("need 0 < D_low <= D <= D_high")
        if self.mcache_gossip > self.mcache_len or self.mcache_len < 1:
            raise ValueError("need 1 <= mcache_gossip <= mcache_len")
        if self.heartbeat_s <= 0:
            raise ValueError("heartbeat_s must be positive")


class GossipMessage:
    """A message as subscribers and validators see it."""

    __slots__ = ("topic", "data", "from_peer", "seqno", "msg_id", "received_from",
                 "signature", "key")

    def __init__(self, topic: str, data: bytes, from_peer: PeerId, seqno: bytes,
                 msg_id: bytes = b"", received_from: PeerId | None = None,
                 signature: bytes | None = None, key: bytes | None = None) -> None:
        self.topic = topic
        self.data = data
        self.from_peer = from_peer
        self.seqno = seqno
        self.msg_id = msg_id
        self.received_from = received_from   # None for a message we published
        self.signature = signature
        self.key = key

    def __repr__(self) -> str:
        return "GossipMessage(%r, %d bytes, from %s)" % (self.topic, len(self.data),
                                                         self.from_peer)


def default_msg_id(msg: GossipMessage) -> bytes:
    """from + seqno, as go-libp2p and js-libp2p compute it (raw bytes)."""
    return msg.from_peer.raw + msg.seqno


def verify_signature(msg: Message, origin: PeerId) -> bool:
    """StrictSign: a signature by `origin`'s key (the key field, or the key inlined in
    the PeerId) over "libp2p-pubsub:" + the message without signature and key."""
    if msg.signature is None:
        return False
    try:
        if msg.key is not None:
            key = PublicKey.decode(msg.key)
            if not origin.matches(key):
                return False
        else:
            inline = origin.inline_key()
            if inline is None:
                return False
            key = inline
        return key.verify(msg.signature, msg.signed_payload())
    except ProtocolError:
        return False


class _Score:
    __slots__ = ("invalid", "behaviour", "app", "last_seen")

    def __init__(self) -> None:
        self.invalid = 0.0
        self.behaviour = 0.0
        self.app = 0.0
        self.last_seen = time.monotonic()


class _Peer:
    """What we know about one pubsub peer and its outbound queue."""

    def __init__(self, peer_id: PeerId) -> None:
        self.peer_id = peer_id
        self.protocol = ""                  # negotiated on our outbound stream
        self.inbound_protocol = ""
        self.stream: Stream | None = None
        self.inbound: Stream | None = None
        self.queue: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.writer: asyncio.Task[None] | None = None
        self.topics: set[str] = set()
        self.dont_send: OrderedDict[bytes, int] = OrderedDict()
        self.ihave_seen = 0                 # IHAVEs this heartbeat
        self.iwant_asked = 0                # ids we asked it for this heartbeat
        self.throttled = 0
        self.closed = False

    @property
    def proto(self) -> str:
        return self.protocol or self.inbound_protocol

    @property
    def is_gossip(self) -> bool:
        return self.proto.startswith("/meshsub/")

    @property
    def is_flood(self) -> bool:
        return self.proto == FLOODSUB


class _MCache:
    """The message cache: `length` windows of ids; gossip about the newest `gossip`."""

    def __init__(self, length: int, gossip: int) -> None:
        self.gossip = gossip
        self.windows: deque[list[tuple[bytes, str]]] = deque([[] for _ in range(length)],
                                                              maxlen=length)
        self.msgs: dict[bytes, Message] = {}
        self.sent: dict[bytes, dict[PeerId, int]] = {}

    def put(self, mid: bytes, msg: Message) -> None:
        if mid in self.msgs:
            return
        self.msgs[mid] = msg
        self.windows[0].append((mid, msg.topic))

    def get(self, mid: bytes) -> Message | None:
        return self.msgs.get(mid)

    def count_sent(self, mid: bytes, peer: PeerId) -> int:
        per = self.sent.setdefault(mid, {})
        per[peer] = per.get(peer, 0) + 1
        return per[peer]

    def gossip_ids(self) -> dict[str, list[bytes]]:
        out: dict[str, list[bytes]] = {}
        for i, window in enumerate(self.windows):
            if i >= self.gossip:
                break
            for mid, topic in window:
                out.setdefault(topic, []).append(mid)
        return out

    def shift(self) -> None:
        last = self.windows[-1]
        for mid, _t in last:
            self.msgs.pop(mid, None)
            self.sent.pop(mid, None)
        self.windows.appendleft([])


class GossipSub:
    """A GossipSub router on `host`. Use `await start()`/`await stop()` or `async with`."""

    def __init__(self, host: Host, config: GossipConfig | None = None) -> None:
        self.host = host
        self.config = config or GossipConfig()
        self.config.check()
        self._rng = random.Random(self.config.seed)
        self._msg_id = self.config.msg_id_fn or default_msg_id
        self._default_id = self.config.msg_id_fn is None
        self._peers: dict[PeerId, _Peer] = {}
        self._topics: dict[str, set[PeerId]] = {}       # who subscribes to what
        self._subs: dict[str, Handler] = {}
        self._mesh: dict[str, set[PeerId]] = {}
        self._fanout: dict[str, set[PeerId]] = {}
        self._fanout_last: dict[str, float] = {}
        self._backoff: dict[tuple[str, PeerId], float] = {}
        self._seen: OrderedDict[bytes, float] = OrderedDict()
        self._mcache = _MCache(self.config.mcache_len, self.config.mcache_gossip)
        self._promises: dict[bytes, tuple[PeerId, float]] = {}
        self._scores: OrderedDict[PeerId, _Score] = OrderedDict()
        self._validators: dict[str, Validator] = {}
        self._prefix_validators: dict[str, Validator] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._handler_tasks: set[asyncio.Task[None]] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._seqno = time.time_ns()
        self._heartbeats = 0
        self._running = False
        self.counters: dict[str, int] = dict.fromkeys((
            "received", "delivered", "duplicates", "invalid", "invalid_signature",
            "rejected", "ignored", "throttled", "not_subscribed", "published",
            "published_no_peers", "forwarded", "dropped_queue_full", "dropped_handlers",
            "handler_errors", "validator_errors", "graylisted_rpcs", "malformed_rpcs",
            "iwant_sent", "iwant_served", "ihave_sent", "graft_sent", "prune_sent",
            "graft_received", "prune_received", "broken_promises", "idontwant_sent",
            "idontwant_received", "idontwant_skipped", "px_ignored", "seen_evicted",
            "subscription_limit"), 0)

    # -- lifetime ------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        for proto in self.config.protocols:
            self.host.set_stream_handler(proto, self._handle_stream)
        self.host.add_event_handler(self._on_peer_event)
        for peer in self.host.connected_peers():
            self._add_peer(peer)
        self._heartbeat_task = asyncio.ensure_future(self._heartbeat_loop())

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.host.remove_event_handler(self._on_peer_event)
        for proto in self.config.protocols:
            self.host.remove_stream_handler(proto)
        tasks: list[asyncio.Task[None]] = list(self._tasks) + list(self._handler_tasks)
        if self._heartbeat_task is not None:
            tasks.append(self._heartbeat_task)
        for ps in list(self._peers.values()):
            self._remove_peer(ps.peer_id, reset=True)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)

    async def __aenter__(self) -> GossipSub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

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
        self._join(topic)

    def unsubscribe(self, topic: str) -> None:
        """Leave `topic`: PRUNE our mesh peers and tell everyone."""
        if self._subs.pop(topic, None) is None:
            return
        self._announce(topic, False)
        mesh = self._mesh.pop(topic, set())
        for p in mesh:
            self._add_backoff(topic, p, self.config.unsubscribe_backoff_s)
            ps = self._peers.get(p)
            if ps is not None:
                ctl = Control()
                ctl.prune.append(self._make_prune(ps, topic, self.config.unsubscribe_backoff_s))
                self._send_control(ps, ctl)

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
        if self._has_validator(topic):
            result = await self._validate(gm)
            if result != ACCEPT:
                raise PublishRejected("local validator said %s" % result)
        self._mark_seen(mid)
        self._mcache.put(mid, msg)
        targets = self._publish_targets(topic)
        data_frame = frame(RPC(publish=[msg]).encode())
        for ps in targets:
            self._enqueue(ps, data_frame)
        self.counters["published"] += 1
        if not targets:
            self.counters["published_no_peers"] += 1
        return mid

    def set_validator(self, topic: str, fn: Validator, *, prefix: bool = False) -> None:
        """Validate messages on `topic` (or on every topic starting with it when `prefix`).

        `fn(msg)` returns (or resolves to) "accept", "reject" (dropped, the forwarding
        peer is penalised), "ignore" (dropped, no penalty) or "throttle" (not standard
        libp2p: dropped like "ignore" and counted against the forwarding peer in
        `counters["throttled"]` and its per-peer throttle count, without penalty). When
        several validators match, the strictest result wins. An exception counts as
        "ignore". Pass fn=None-like removal through `remove_validator`.
        """
        (self._prefix_validators if prefix else self._validators)[topic] = fn

    def remove_validator(self, topic: str, *, prefix: bool = False) -> None:
        (self._prefix_validators if prefix else self._validators).pop(topic, None)

    def peers(self, topic: str | None = None) -> list[PeerId]:
        """Pubsub peers we have a stream with (that subscribe to `topic`, if given)."""
        if topic is None:
            return [p for p, ps in self._peers.items() if ps.proto]
        return [p for p in self._topics.get(topic, ()) if p in self._peers]

    def mesh_peers(self, topic: str) -> list[PeerId]:
        return list(self._mesh.get(topic, ()))

    def fanout_peers(self, topic: str) -> list[PeerId]:
        return list(self._fanout.get(topic, ()))

    def score(self, peer: PeerId) -> float:
        """The peer's score (0 when unknown); see GossipConfig for the weights."""
        s = self._scores.get(peer)
        if s is None:
            return 0.0
        c = self.config
        over = max(0.0, s.behaviour - c.behaviour_penalty_threshold)
        return (c.invalid_message_weight * s.invalid * s.invalid
                + c.behaviour_penalty_weight * over * over + s.app)

    def set_app_score(self, peer: PeerId, value: float) -> None:
        """The application-specific part of a peer's score (P5), e.g. from a realm."""
        self._score_of(peer).app = value

    def peer_throttled(self, peer: PeerId) -> int:
        ps = self._peers.get(peer)
        return ps.throttled if ps is not None else 0

    # -- peers ---------------------------------------------------------------------------
    def _on_peer_event(self, ev: PeerEvent) -> None:
        if not self._running:
            return
        if ev.kind == CONNECTED:
            self._add_peer(ev.peer_id)
        elif ev.kind == IDENTIFIED:
            # A peer that added pubsub later (identify push), or whose first negotiation
            # raced its own start-up.
            ps = self._peers.get(ev.peer_id)
            if ev.info is not None and any(p in ev.info.protocols
                                           for p in self.config.protocols):
                if ps is None:
                    self._add_peer(ev.peer_id)
                elif ps.writer is None or ps.writer.done():
                    self._start_writer(ps)
        elif ev.kind == DISCONNECTED:
            if self.host.connection(ev.peer_id) is None:
                self._remove_peer(ev.peer_id)

    def _add_peer(self, peer: PeerId) -> _Peer:
        ps = self._peers.get(peer)
        if ps is not None:
            return ps
        ps = _Peer(peer)
        if len(self._peers) >= self.config.max_peers:
            log.info("gossipsub: peer limit reached; ignoring %s", peer)
            ps.closed = True
            return ps
        self._peers[peer] = ps
        self._score_of(peer)
        self._start_writer(ps)
        return ps

    def _start_writer(self, ps: _Peer) -> None:
        ps.writer = self._spawn(self._writer(ps))

    def _remove_peer(self, peer: PeerId, *, reset: bool = False) -> None:
        ps = self._peers.pop(peer, None)
        if ps is None:
            return
        ps.closed = True
        ps.wake.set()
        if ps.writer is not None and not ps.writer.done():
            ps.writer.cancel()
        for st in (ps.inbound, ps.stream):
            if st is not None and reset:
                st.reset()
        for t in ps.topics:
            members = self._topics.get(t)
            if members is not None:
                members.discard(peer)
                if not members:
                    del self._topics[t]
        for m in self._mesh.values():
            m.discard(peer)
        for f in self._fanout.values():
            f.discard(peer)
        sc = self._scores.get(peer)
        if sc is not None:
            sc.last_seen = time.monotonic()

    def _score_of(self, peer: PeerId) -> _Score:
        s = self._scores.get(peer)
        if s is None:
            s = self._scores[peer] = _Score()
            if len(self._scores) > self.config.max_scores:
                # Forget the oldest records of peers that are gone (a connected peer's
                # record stays: forgetting it would pardon it).
                excess = len(self._scores) - self.config.max_scores
                for old in [p for p in self._scores if p not in self._peers][:excess]:
                    del self._scores[old]
        return s

    def _penalise_invalid(self, peer: PeerId | None, why: str) -> None:
        if peer is None:
            return
        self._score_of(peer).invalid += 1.0
        log.info("gossipsub: %s from %s (score now %.1f)", why, peer, self.score(peer))

    def _penalise_behaviour(self, peer: PeerId, why: str, amount: float = 1.0) -> None:
        self._score_of(peer).behaviour += amount
        log.debug("gossipsub: %s by %s (score now %.1f)", why, peer, self.score(peer))

    # -- outbound ------------------------------------------------------------------------
    def _enqueue(self, ps: _Peer, data: bytes) -> None:
        if ps.closed:
            return
        if len(ps.queue) >= self.config.max_queue:
            self.counters["dropped_queue_full"] += 1
            return
        ps.queue.append(data)
        ps.wake.set()

    def _send_control(self, ps: _Peer, ctl: Control) -> None:
        if not ctl.empty():
            self._enqueue(ps, frame(RPC(control=ctl).encode()))

    def _hello(self) -> bytes:
        return frame(RPC(subscriptions=[(True, t) for t in self._subs]).encode())

    async def _writer(self, ps: _Peer) -> None:
        """Open our stream to the peer (once), say hello, then drain its queue in batches."""
        attempts = 0
        while not ps.closed:
            try:
                st = await self.host.new_stream(ps.peer_id, list(self.config.protocols),
                                                dial=False)
            except NegotiationError:
                if ps.inbound is None:
                    # Not a pubsub peer; forget it until identify says otherwise.
                    self._peers.pop(ps.peer_id, None)
                    ps.closed = True
                return
            except (TimeoutError, MeshError, OSError) as e:
                attempts += 1
                if self.host.connection(ps.peer_id) is None or attempts > 3:
                    log.debug("gossipsub: no stream to %s: %s", ps.peer_id, describe(e))
                    self._remove_peer(ps.peer_id)
                    return
                await asyncio.sleep(0.5 * attempts)
                continue
            ps.stream = st
            ps.protocol = st.protocol
            try:
                if self._subs:
                    await st.write(self._hello())
                attempts = 0
                while not ps.closed:
                    if not ps.queue:
                        ps.wake.clear()
                        await ps.wake.wait()
                        continue
                    batch: list[bytes] = []
                    size = 0
                    while ps.queue and size < self.config.max_write_batch_bytes:
                        b = ps.queue.popleft()
                        batch.append(b)
                        size += len(b)
                    await st.write(b"".join(batch) if len(batch) > 1 else batch[0])
            except (StreamReset, MeshError, ConnectionError, OSError) as e:
                attempts += 1
                ps.stream = None
                if self.host.connection(ps.peer_id) is None or attempts > 3:
                    log.debug("gossipsub: stream to %s lost: %s", ps.peer_id, describe(e))
                    self._remove_peer(ps.peer_id)
                    return
                await asyncio.sleep(0.5 * attempts)

    # -- inbound -------------------------------------------------------------------------
    async def _handle_stream(self, stream: Stream) -> None:
        peer = stream.remote_peer
        ps = self._peers.get(peer)
        if ps is None:
            ps = self._add_peer(peer)
        if ps.closed:
            stream.reset()
            return
        if ps.inbound is not None and ps.inbound is not stream:
            ps.inbound.reset()  # one inbound stream per peer: the newest wins
        ps.inbound = stream
        ps.inbound_protocol = stream.protocol
        if ps.writer is None or ps.writer.done():
            self._start_writer(ps)
        max_len = self.config.max_transmit_size
        while True:
            try:
                data = await stream.read_lp(max_len)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    log.debug("gossipsub: %s closed mid-RPC", peer)
                return
            except ProtocolError as e:
                self.counters["malformed_rpcs"] += 1
                self._penalise_behaviour(peer, "oversized RPC")
                log.info("gossipsub: closing stream from %s: %s", peer, e)
                stream.reset()
                return
            try:
                rpc = RPC.decode(data, max_size=max_len)
            except ProtocolError as e:
                self.counters["malformed_rpcs"] += 1
                self._penalise_behaviour(peer, "malformed RPC")
                log.info("gossipsub: malformed RPC from %s: %s; closing the stream", peer, e)
                stream.reset()
                return
            if ps.closed:
                return
            await self._handle_rpc(ps, rpc)

    async def _handle_rpc(self, ps: _Peer, rpc: RPC) -> None:
        peer = ps.peer_id
        if self.score(peer) < self.config.graylist_threshold:
            self.counters["graylisted_rpcs"] += 1
            return
        for sub, topic in rpc.subscriptions:
            self._on_subscription(ps, sub, topic)
        for msg in rpc.publish:
            await self._handle_message(ps, msg)
            if ps.closed:
                return
        if rpc.control is not None:
            self._handle_control(ps, rpc.control)

    def _on_subscription(self, ps: _Peer, sub: bool, topic: str) -> None:
        if sub:
            if topic in ps.topics:
                return
            if len(ps.topics) >= self.config.max_topics_per_peer:
                self.counters["subscription_limit"] += 1
                return
            ps.topics.add(topic)
            self._topics.setdefault(topic, set()).add(ps.peer_id)
        else:
            if topic not in ps.topics:
                return
            ps.topics.discard(topic)
            members = self._topics.get(topic)
            if members is not None:
                members.discard(ps.peer_id)
                if not members:
                    del self._topics[topic]
            mesh = self._mesh.get(topic)
            if mesh is not None:
                mesh.discard(ps.peer_id)
            fan = self._fanout.get(topic)
            if fan is not None:
                fan.discard(ps.peer_id)

    # -- messages ------------------------------------------------------------------------
    async def _handle_message(self, ps: _Peer, msg: Message) -> None:
        c = self.counters
        c["received"] += 1
        src = ps.peer_id
        if msg.from_ is None or msg.seqno is None:
            c["invalid"] += 1
            self._penalise_invalid(src, "unsigned message without from/seqno")
            return
        if self._default_id and msg.from_ + msg.seqno in self._seen:
            # Most copies a router gets are duplicates: drop them before any parsing.
            c["duplicates"] += 1
            self._promises.pop(msg.from_ + msg.seqno, None)
            return
        try:
            origin = PeerId(msg.from_)
        except ProtocolError:
            c["invalid"] += 1
            self._penalise_invalid(src, "message with a bad from field")
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
            self._promises.pop(mid, None)
            return
        if msg.topic not in self._subs:
            c["not_subscribed"] += 1
            return
        # Seen before validation: a message is validated once, however many peers send it.
        self._mark_seen(mid)
        self._promises.pop(mid, None)
        if origin == self.host.peer_id:
            c["duplicates"] += 1  # our own message came back after the seen cache forgot it
            return
        if not verify_signature(msg, origin):
            c["invalid"] += 1
            c["invalid_signature"] += 1
            self._penalise_invalid(src, "invalid signature")
            return
        if self._has_validator(msg.topic):
            result = await self._validate(gm)
            if result != ACCEPT:
                if result == REJECT:
                    c["rejected"] += 1
                    self._penalise_invalid(src, "message rejected by a validator")
                elif result == THROTTLE:
                    c["throttled"] += 1
                    ps.throttled += 1
                else:
                    c["ignored"] += 1
                return
        self._mcache.put(mid, msg)
        self._forward(msg, mid, src, origin)
        self._deliver(gm)

    def _forward(self, msg: Message, mid: bytes, src: PeerId, origin: PeerId) -> None:
        topic = msg.topic
        targets: list[_Peer] = []
        mesh = self._mesh.get(topic, ())
        big = len(msg.raw) >= self.config.idontwant_min_bytes
        dontwant: bytes | None = None
        for p in mesh:
            if p == src or p == origin:
                continue
            ps = self._peers.get(p)
            if ps is None:
                continue
            if mid in ps.dont_send:
                self.counters["idontwant_skipped"] += 1
                continue
            targets.append(ps)
        for p in self._topics.get(topic, ()):
            if p == src or p == origin or p in mesh:
                continue
            ps = self._peers.get(p)
            if ps is not None and ps.is_flood:
                targets.append(ps)
        if big:
            # Tell our 1.2 mesh peers not to send it to us: they may not have yet.
            for p in mesh:
                ps = self._peers.get(p)
                if ps is not None and p != src and ps.proto == MESHSUB_12:
                    if dontwant is None:
                        ctl = Control()
                        ctl.idontwant.append([mid])
                        dontwant = frame(RPC(control=ctl).encode())
                    self._enqueue(ps, dontwant)
                    self.counters["idontwant_sent"] += 1
        if not targets:
            return
        data = frame(RPC(publish=[msg]).encode())
        for ps in targets:
            self._enqueue(ps, data)
        self.counters["forwarded"] += len(targets)

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

    def _has_validator(self, topic: str) -> bool:
        if topic in self._validators:
            return True
        return any(topic.startswith(p) for p in self._prefix_validators)

    async def _validate(self, gm: GossipMessage) -> str:
        fns: list[Validator] = [v for p, v in self._prefix_validators.items()
                                if gm.topic.startswith(p)]
        exact = self._validators.get(gm.topic)
        if exact is not None:
            fns.append(exact)
        worst = ACCEPT
        for fn in fns:
            try:
                r = fn(gm)
                if inspect.isawaitable(r):
                    r = await r
            except asyncio.CancelledError:
                raise
            except Exception:
                self.counters["validator_errors"] += 1
                log.exception("gossipsub: validator for %s failed", gm.topic)
                r = IGNORE
            if r not in _RANK:
                self.counters["validator_errors"] += 1
                r = IGNORE
            if _RANK[str(r)] > _RANK[worst]:
                worst = str(r)
        return worst

    def _mark_seen(self, mid: bytes) -> None:
        self._seen[mid] = time.monotonic()
        if len(self._seen) > self.config.max_seen:
            self._seen.popitem(last=False)
            self.counters["seen_evicted"] += 1

    def _publish_targets(self, topic: str) -> list[_Peer]:
        c = self.config
        out: dict[PeerId, _Peer] = {}
        subscribers = self._topics.get(topic, set())
        if c.flood_publish:
            for p in subscribers:
                ps = self._peers.get(p)
                if ps is not None and self.score(p) >= c.publish_threshold:
                    out[p] = ps
        if topic in self._subs:
            peers: Iterable[PeerId] = self._mesh.get(topic, ())
        else:
            fan = self._fanout.get(topic)
            if fan is None:
                cands = [p for p in subscribers if (ps := self._peers.get(p)) is not None
                         and ps.is_gossip and self.score(p) >= c.publish_threshold]
                fan = set(self._rng.sample(cands, min(c.D, len(cands))))
                self._fanout[topic] = fan
            self._fanout_last[topic] = time.monotonic()
            peers = fan
        for p in peers:
            ps = self._peers.get(p)
            if ps is not None:
                out[p] = ps
        for p in subscribers:
            ps = self._peers.get(p)
            if ps is not None and ps.is_flood:
                out[p] = ps
        return list(out.values())

    # -- subscriptions and control -------------------------------------------------------
    def _announce(self, topic: str, sub: bool) -> None:
        data = frame(RPC(subscriptions=[(sub, topic)]).encode())
        for ps in self._peers.values():
            if ps.stream is not None:  # before that, the hello carries it
                self._enqueue(ps, data)

    def _join(self, topic: str) -> None:
        c = self.config
        mesh: set[PeerId] = set()
        fan = self._fanout.pop(topic, None)
        self._fanout_last.pop(topic, None)
        now = time.monotonic()
        if fan:
            mesh |= {p for p in fan if self._graftable(p, topic, now)}
        if len(mesh) < c.D:
            cands = [p for p in self._topics.get(topic, ())
                     if p not in mesh and self._graftable(p, topic, now)]
            mesh |= set(self._rng.sample(cands, min(c.D - len(mesh), len(cands))))
        self._mesh[topic] = mesh
        for p in mesh:
            ps = self._peers[p]
            ctl = Control()
            ctl.graft.append(topic)
            self._send_control(ps, ctl)
            self.counters["graft_sent"] += 1

    def _graftable(self, p: PeerId, topic: str, now: float) -> bool:
        ps = self._peers.get(p)
        # We wait two heartbeats past a backoff before grafting (the spec's slack): the
        # peer checks our GRAFT against its own clock and copy of the same backoff.
        slack = 2 * self.config.heartbeat_s
        return (ps is not None and ps.is_gossip
                and self._backoff.get((topic, p), -slack) + slack <= now
                and self.score(p) >= 0)

    def _add_backoff(self, topic: str, peer: PeerId, seconds: float) -> None:
        # Whole seconds, as the PRUNE carries them: both ends hold the same backoff.
        until = time.monotonic() + math.ceil(seconds)
        key = (topic, peer)
        if self._backoff.get(key, 0.0) < until:
            self._backoff[key] = until

    def _make_prune(self, ps: _Peer, topic: str, backoff_s: float) -> Prune:
        # v1.0 peers do not know the backoff field; v1.1+ learn how long to stay away.
        return Prune(topic, backoff_s=None if ps.proto == MESHSUB_10 else math.ceil(backoff_s))

    def _handle_control(self, ps: _Peer, ctl: Control) -> None:
        out = Control()
        self._on_graft(ps, ctl.graft, out)
        self._on_prune(ps, ctl.prune)
        self._on_ihave(ps, ctl.ihave, out)
        iwant_reply = self._on_iwant(ps, ctl.iwant)
        if ctl.idontwant:
            self._on_idontwant(ps, ctl.idontwant)
        self._send_control(ps, out)
        if iwant_reply:
            self._send_messages(ps, iwant_reply)

    def _on_graft(self, ps: _Peer, topics: list[str], out: Control) -> None:
        c = self.config
        now = time.monotonic()
        p = ps.peer_id
        for topic in topics:
            self.counters["graft_received"] += 1
            mesh = self._mesh.get(topic)
            if mesh is None:
                # Not subscribed: refuse without a penalty (it may have raced our leave).
                out.prune.append(self._make_prune(ps, topic, c.prune_backoff_s))
                continue
            if p in mesh:
                continue
            until = self._backoff.get((topic, p), 0.0)
            if until > now:
                # A GRAFT soon after the PRUNE is a flood, not a clock skew: penalised twice.
                flood = until - now > math.ceil(c.prune_backoff_s) - c.graft_flood_threshold_s
                self._penalise_behaviour(p, "GRAFT during backoff", 2.0 if flood else 1.0)
                self._add_backoff(topic, p, c.prune_backoff_s)
                out.prune.append(self._make_prune(ps, topic, c.prune_backoff_s))
                continue
            if self.score(p) < 0 or len(mesh) >= c.D_high:
                self._add_backoff(topic, p, c.prune_backoff_s)
                out.prune.append(self._make_prune(ps, topic, c.prune_backoff_s))
                continue
            mesh.add(p)
        self.counters["prune_sent"] += len(out.prune)

    def _on_prune(self, ps: _Peer, prunes: list[Prune]) -> None:
        c = self.config
        for pr in prunes:
            self.counters["prune_received"] += 1
            mesh = self._mesh.get(pr.topic)
            if mesh is not None:
                mesh.discard(ps.peer_id)
            backoff = c.prune_backoff_s if pr.backoff_s is None else min(pr.backoff_s, 3600)
            # Only for topics we take part in: the backoff map stays bounded.
            if pr.topic in self._subs or pr.topic in self._fanout:
                self._add_backoff(pr.topic, ps.peer_id, backoff)
            if pr.peers:
                # Peer exchange is optional; we connect only to configured peers.
                self.counters["px_ignored"] += 1

    def _on_ihave(self, ps: _Peer, ihaves: list[tuple[str, list[bytes]]], out: Control) -> None:
        c = self.config
        if not ihaves or self.score(ps.peer_id) < c.gossip_threshold:
            return
        want: list[bytes] = []
        for topic, ids in ihaves:
            ps.ihave_seen += 1
            if ps.ihave_seen > c.max_ihave_messages:
                break
            if topic not in self._mesh:
                continue
            for mid in ids:
                if ps.iwant_asked >= c.max_ihave_length:
                    break
                if mid in self._seen or mid in self._promises or mid in want:
                    continue
                want.append(mid)
                ps.iwant_asked += 1
        if not want:
            return
        self._rng.shuffle(want)
        out.iwant.append(want)
        self.counters["iwant_sent"] += len(want)
        deadline = time.monotonic() + c.iwant_followup_s
        # A promise per id; broken ones are penalised once per peer per heartbeat.
        for mid in want:
            if len(self._promises) < 8 * c.max_ihave_length:
                self._promises[mid] = (ps.peer_id, deadline)

    def _on_iwant(self, ps: _Peer, iwants: list[list[bytes]]) -> list[Message]:
        c = self.config
        if not iwants or self.score(ps.peer_id) < c.gossip_threshold:
            return []
        out: list[Message] = []
        seen: set[bytes] = set()
        for ids in iwants:
            for mid in ids:
                if mid in seen:
                    continue
                seen.add(mid)
                msg = self._mcache.get(mid)
                if msg is None:
                    continue
                if self._mcache.count_sent(mid, ps.peer_id) > c.gossip_retransmission:
                    continue
                out.append(msg)
        self.counters["iwant_served"] += len(out)
        return out

    def _on_idontwant(self, ps: _Peer, lists: list[list[bytes]]) -> None:
        if ps.proto != MESHSUB_12:
            return
        hb = self._heartbeats
        for ids in lists:
            for mid in ids:
                self.counters["idontwant_received"] += 1
                ps.dont_send[mid] = hb
                if len(ps.dont_send) > self.config.max_idontwant:
                    ps.dont_send.popitem(last=False)

    def _send_messages(self, ps: _Peer, msgs: list[Message]) -> None:
        """Send messages in RPCs that stay below max_transmit_size."""
        limit = self.config.max_transmit_size - 64
        batch: list[Message] = []
        size = 0
        for m in msgs:
            n = len(m.raw) + 8
            if batch and size + n > limit:
                self._enqueue(ps, frame(RPC(publish=batch).encode()))
                batch, size = [], 0
            batch.append(m)
            size += n
        if batch:
            self._enqueue(ps, frame(RPC(publish=batch).encode()))

    # -- heartbeat -----------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        await asyncio.sleep(self.config.heartbeat_initial_delay_s)
        while True:
            try:
                self.heartbeat()
            except Exception:
                log.exception("gossipsub: heartbeat failed")
            await asyncio.sleep(self.config.heartbeat_s)

    def heartbeat(self) -> None:
        """One round of maintenance (runs every heartbeat_s; public for tests)."""
        c = self.config
        now = time.monotonic()
        self._heartbeats += 1
        self._decay_scores(now)
        self._check_promises(now)
        for ps in self._peers.values():
            ps.ihave_seen = 0
            ps.iwant_asked = 0
            if ps.dont_send:
                old = self._heartbeats - c.idontwant_ttl_heartbeats
                while ps.dont_send and next(iter(ps.dont_send.values())) < old:
                    ps.dont_send.popitem(last=False)
        grafts: dict[PeerId, list[str]] = {}
        prunes: dict[PeerId, list[str]] = {}
        for topic, mesh in self._mesh.items():
            self._maintain_mesh(topic, mesh, now, grafts, prunes)
        for topic in list(self._fanout):
            if self._fanout_last.get(topic, 0.0) + c.fanout_ttl_s < now:
                del self._fanout[topic]
                self._fanout_last.pop(topic, None)
                continue
            fan = self._fanout[topic]
            subscribers = self._topics.get(topic, set())
            for p in list(fan):
                if p not in subscribers or p not in self._peers \
                        or self.score(p) < c.publish_threshold:
                    fan.discard(p)
            if len(fan) < c.D:
                cands = [p for p in subscribers if p not in fan and (q := self._peers.get(p))
                         is not None and q.is_gossip and self.score(p) >= c.publish_threshold]
                fan |= set(self._rng.sample(cands, min(c.D - len(fan), len(cands))))
        ihaves = self._gossip()
        targets = set(grafts) | set(prunes) | set(ihaves)
        for p in targets:
            target = self._peers.get(p)
            if target is None:
                continue
            ctl = Control()
            ctl.graft = grafts.get(p, [])
            ctl.prune = [self._make_prune(target, t, c.prune_backoff_s)
                         for t in prunes.get(p, [])]
            ctl.ihave = ihaves.get(p, [])
            self._send_control(target, ctl)
        self._mcache.shift()
        self._expire(now)

    def _maintain_mesh(self, topic: str, mesh: set[PeerId], now: float,
                       grafts: dict[PeerId, list[str]], prunes: dict[PeerId, list[str]]) -> None:
        c = self.config
        subscribers = self._topics.get(topic, set())
        for p in list(mesh):
            if p not in self._peers or p not in subscribers:
                mesh.discard(p)
            elif self.score(p) < 0:
                mesh.discard(p)
                self._add_backoff(topic, p, c.prune_backoff_s)
                prunes.setdefault(p, []).append(topic)
                self.counters["prune_sent"] += 1
        if len(mesh) < c.D_low:
            cands = [p for p in subscribers if p not in mesh and self._graftable(p, topic, now)]
            for p in self._rng.sample(cands, min(c.D - len(mesh), len(cands))):
                mesh.add(p)
                grafts.setdefault(p, []).append(topic)
                self.counters["graft_sent"] += 1
        elif len(mesh) > c.D_high:
            peers = list(mesh)
            self._rng.shuffle(peers)
            # The D_score best stay; the rest of the D are chosen at random.
            peers.sort(key=self.score, reverse=True)
            keep = peers[:c.D_score]
            rest = peers[c.D_score:]
            self._rng.shuffle(rest)
            keep += rest[:c.D - len(keep)]
            for p in rest[c.D - c.D_score:]:
                mesh.discard(p)
                self._add_backoff(topic, p, c.prune_backoff_s)
                prunes.setdefault(p, []).append(topic)
                self.counters["prune_sent"] += 1

    def _gossip(self) -> dict[PeerId, list[tuple[str, list[bytes]]]]:
        c = self.config
        out: dict[PeerId, list[tuple[str, list[bytes]]]] = {}
        by_topic = self._mcache.gossip_ids()
        for topic, ids in by_topic.items():
            exclude = self._mesh.get(topic)
            if exclude is None:
                exclude = self._fanout.get(topic)
                if exclude is None:
                    continue
            cands = [p for p in self._topics.get(topic, ())
                     if p not in exclude and (ps := self._peers.get(p)) is not None
                     and ps.is_gossip and self.score(p) >= c.gossip_threshold]
            if not cands:
                continue
            n = max(c.D_lazy, int(math.ceil(c.gossip_factor * len(cands))))
            chosen = self._rng.sample(cands, min(n, len(cands)))
            if len(ids) > c.max_ihave_length:
                ids = self._rng.sample(ids, c.max_ihave_length)
            for p in chosen:
                out.setdefault(p, []).append((topic, ids))
                self.counters["ihave_sent"] += 1
        return out

    def _decay_scores(self, now: float) -> None:
        d = self.config.score_decay
        retain = self.config.retain_score_s
        for peer, s in list(self._scores.items()):
            if s.invalid:
                s.invalid = s.invalid * d if s.invalid > 0.01 else 0.0
            if s.behaviour:
                s.behaviour = s.behaviour * d if s.behaviour > 0.01 else 0.0
            if peer not in self._peers and s.last_seen + retain < now:
                del self._scores[peer]

    def _check_promises(self, now: float) -> None:
        broken: set[PeerId] = set()
        for mid, (peer, deadline) in list(self._promises.items()):
            if deadline <= now:
                del self._promises[mid]
                broken.add(peer)
        for peer in broken:
            self.counters["broken_promises"] += 1
            self._penalise_behaviour(peer, "IWANT promise broken")

    def _expire(self, now: float) -> None:
        horizon = now - self.config.seen_ttl_s
        seen = self._seen
        while seen:
            mid, t = next(iter(seen.items()))
            if t > horizon:
                break
            seen.popitem(last=False)
        for key, until in list(self._backoff.items()):
            # Keep a little past expiry, as go does, so a GRAFT racing it is not penalised
            # late; then forget.
            if until + 2 * self.config.heartbeat_s < now:
                del self._backoff[key]


__all__ = [
    "ACCEPT", "FLOODSUB", "IGNORE", "MESHSUB_10", "MESHSUB_11", "MESHSUB_12", "PROTOCOLS",
    "REJECT", "THROTTLE", "GossipConfig", "GossipMessage", "GossipSub", "PublishRejected",
    "default_msg_id", "verify_signature",
]
