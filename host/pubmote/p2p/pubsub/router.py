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
import time
from collections.abc import Awaitable, Iterable

from pubmote.p2p.errors import MeshError, NegotiationError, ProtocolError, StreamReset
from pubmote.p2p.host import CONNECTED, DISCONNECTED, IDENTIFIED, PeerEvent, describe
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
from pubmote.p2p.pubsub.control import ControlHandling
from pubmote.p2p.pubsub.heartbeat import MeshMaintenance
from pubmote.p2p.pubsub.messages import (
    ACCEPT,
    IGNORE,
    REJECT,
    THROTTLE,
    GossipMessage,
    Handler,
    default_msg_id,
    verify_signature,
)
from pubmote.p2p.pubsub.rpc import RPC, SIGN_PREFIX, Control, Message, frame
from pubmote.p2p.pubsub.state import PeerState
from pubmote.p2p.pubsub.validation import Validation
from pubmote.p2p.yamux import Stream

log = logging.getLogger("pubmote.p2p.pubsub")

__all__ = ["ACCEPT", "FLOODSUB", "IGNORE", "MESHSUB_10", "MESHSUB_11", "MESHSUB_12",
           "PROTOCOLS", "REJECT", "THROTTLE", "GossipConfig", "GossipMessage", "GossipSub",
           "PublishRejected", "default_msg_id", "verify_signature"]


class GossipSub(ControlHandling, MeshMaintenance, Validation):
    """A GossipSub router on `host`. Use `await start()`/`await stop()` or `async with`."""

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

    def peers(self, topic: str | None = None) -> list[PeerId]:
        """Pubsub peers we have a stream with (that subscribe to `topic`, if given)."""
        if topic is None:
            return [p for p, ps in self._peers.items() if ps.proto]
        return [p for p in self._topics.get(topic, ()) if p in self._peers]

    def mesh_peers(self, topic: str) -> list[PeerId]:
        return list(self._mesh.get(topic, ()))

    def fanout_peers(self, topic: str) -> list[PeerId]:
        return list(self._fanout.get(topic, ()))

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

    def _add_peer(self, peer: PeerId) -> PeerState:
        ps = self._peers.get(peer)
        if ps is not None:
            return ps
        ps = PeerState(peer)
        if len(self._peers) >= self.config.max_peers:
            log.info("gossipsub: peer limit reached; ignoring %s", peer)
            ps.closed = True
            return ps
        self._peers[peer] = ps
        self._score_of(peer)
        self._start_writer(ps)
        return ps

    def _start_writer(self, ps: PeerState) -> None:
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

    # -- outbound ------------------------------------------------------------------------
    def _hello(self) -> bytes:
        return frame(RPC(subscriptions=[(True, t) for t in self._subs]).encode())

    async def _writer(self, ps: PeerState) -> None:
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

    async def _handle_rpc(self, ps: PeerState, rpc: RPC) -> None:
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

    def _on_subscription(self, ps: PeerState, sub: bool, topic: str) -> None:
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
    async def _handle_message(self, ps: PeerState, msg: Message) -> None:
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
        targets: list[PeerState] = []
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

    def _mark_seen(self, mid: bytes) -> None:
        self._seen[mid] = time.monotonic()
        if len(self._seen) > self.config.max_seen:
            self._seen.popitem(last=False)
            self.counters["seen_evicted"] += 1

    def _publish_targets(self, topic: str) -> list[PeerState]:
        c = self.config
        out: dict[PeerId, PeerState] = {}
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

    # -- heartbeat -----------------------------------------------------------------------
