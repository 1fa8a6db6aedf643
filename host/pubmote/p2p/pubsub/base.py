"""The router's state and the helpers every part of it uses: peer scores and penalties,
the outbound queues, GRAFT backoff. The control handling (control.py), the heartbeat
(heartbeat.py) and the router (router.py) build on it."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable

from pubmote.p2p.connmgr import OUTBOUND
from pubmote.p2p.host import Host
from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import MESHSUB_10, GossipConfig
from pubmote.p2p.pubsub.messages import Handler, Validator, default_msg_id
from pubmote.p2p.pubsub.rpc import RPC, Control, Prune, frame
from pubmote.p2p.pubsub.state import MessageCache, PeerState, Score

log = logging.getLogger("pubmote.p2p.pubsub")


class RouterBase:
    """State shared by the router's parts; not used on its own."""

    def __init__(self, host: Host, config: GossipConfig | None = None) -> None:
        self.host = host
        self.config = config or GossipConfig()
        self.config.check()
        self._rng = random.Random(self.config.seed)
        self._msg_id = self.config.msg_id_fn or default_msg_id
        self._default_id = self.config.msg_id_fn is None
        self._peers: dict[PeerId, PeerState] = {}
        self._topics: dict[str, set[PeerId]] = {}       # who subscribes to what
        self._subs: dict[str, Handler] = {}
        self._mesh: dict[str, set[PeerId]] = {}
        self._fanout: dict[str, set[PeerId]] = {}
        self._fanout_last: dict[str, float] = {}
        self._backoff: dict[tuple[str, PeerId], float] = {}
        self._seen: OrderedDict[bytes, float] = OrderedDict()
        self._mcache = MessageCache(self.config.mcache_len, self.config.mcache_gossip)
        self._promises: dict[bytes, tuple[PeerId, float]] = {}
        self._scores: OrderedDict[PeerId, Score] = OrderedDict()
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

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _score_of(self, peer: PeerId) -> Score:
        s = self._scores.get(peer)
        if s is None:
            s = self._scores[peer] = Score()
            if len(self._scores) > self.config.max_scores:
                # Forget the oldest records of peers that are gone (a connected peer's
                # record stays: forgetting it would pardon it).
                excess = len(self._scores) - self.config.max_scores
                for old in [p for p in self._scores if p not in self._peers][:excess]:
                    del self._scores[old]
        return s

    @property
    def heartbeats(self) -> int:
        """Heartbeats run since start: the router's clock for backoffs, caches and scores."""
        return self._heartbeats

    def score(self, peer: PeerId) -> float:
        """The peer's score (0 when unknown); see GossipConfig for the weights."""
        s = self._scores.get(peer)
        if s is None:
            return 0.0
        c = self.config
        over = max(0.0, s.behaviour - c.behaviour_penalty_threshold)
        return (c.invalid_message_weight * s.invalid * s.invalid
                + c.behaviour_penalty_weight * over * over)

    def peer_throttled(self, peer: PeerId) -> int:
        ps = self._peers.get(peer)
        return ps.throttled if ps is not None else 0

    def _penalise_invalid(self, peer: PeerId | None, why: str) -> None:
        if peer is None:
            return
        self._score_of(peer).invalid += 1.0
        log.info("gossipsub: %s from %s (score now %.1f)", why, peer, self.score(peer))

    def _penalise_behaviour(self, peer: PeerId, why: str, amount: float = 1.0) -> None:
        self._score_of(peer).behaviour += amount
        log.debug("gossipsub: %s by %s (score now %.1f)", why, peer, self.score(peer))

    def _enqueue(self, ps: PeerState, data: bytes) -> None:
        if ps.closed:
            return
        if len(ps.queue) >= self.config.max_queue:
            self.counters["dropped_queue_full"] += 1
            return
        ps.queue.append(data)
        ps.wake.set()

    def _send_control(self, ps: PeerState, ctl: Control) -> None:
        if not ctl.empty():
            self._enqueue(ps, frame(RPC(control=ctl).encode()))

    def _graftable(self, p: PeerId, topic: str, now: float) -> bool:
        ps = self._peers.get(p)
        # We wait two heartbeats past a backoff before grafting (the spec's slack): the
        # peer checks our GRAFT against its own clock and copy of the same backoff.
        slack = 2 * self.config.heartbeat_s
        return (ps is not None and ps.is_gossip
                and self._backoff.get((topic, p), -slack) + slack <= now
                and self.score(p) >= 0)

    def _dialled(self, p: PeerId) -> bool:
        """Whether our connection to p is one we opened (an outbound connection)."""
        conn = self.host.connection(p)
        return conn is not None and conn.direction == OUTBOUND

    def _add_backoff(self, topic: str, peer: PeerId, seconds: float) -> None:
        # Whole seconds, as the PRUNE carries them: both ends hold the same backoff.
        until = time.monotonic() + math.ceil(seconds)
        key = (topic, peer)
        if self._backoff.get(key, 0.0) < until:
            self._backoff[key] = until

    def _make_prune(self, ps: PeerState, topic: str, backoff_s: float) -> Prune:
        # v1.0 peers do not know the backoff field; v1.1+ learn how long to stay away.
        return Prune(topic, backoff_s=None if ps.proto == MESHSUB_10 else math.ceil(backoff_s))
