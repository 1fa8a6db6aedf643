"""GossipSub control messages: GRAFT and PRUNE (mesh membership, with backoff), IHAVE and
IWANT (gossip, with promises: gossip.py), IDONTWANT (v1.2)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from pubmote.p2p.pubsub.config import MESHSUB_12, GossipConfig
from pubmote.p2p.pubsub.gossip import Gossip
from pubmote.p2p.pubsub.mesh import Mesh, make_prune
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import RPC, Control, Message, Prune, frame
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import PeerState


class ControlHandler:
    """Answers the control part of each RPC; `clock()` is the heartbeat count."""

    def __init__(self, *, config: GossipConfig, peers: PeerTable, mesh: Mesh, gossip: Gossip,
                 scores: PeerScores, clock: Callable[[], int],
                 counters: dict[str, int]) -> None:
        self._config = config
        self._peers = peers
        self._mesh = mesh
        self._gossip = gossip
        self._scores = scores
        self._clock = clock
        self._counters = counters

    def handle(self, ps: PeerState, ctl: Control) -> None:
        out = Control()
        self._on_graft(ps, ctl.graft, out)
        self._on_prune(ps, ctl.prune)
        self._gossip.on_ihave(ps, ctl.ihave, out)
        iwant_reply = self._gossip.on_iwant(ps, ctl.iwant)
        if ctl.idontwant:
            self._on_idontwant(ps, ctl.idontwant)
        self._peers.send_control(ps, out)
        if iwant_reply:
            self._send_messages(ps, iwant_reply)

    def _on_graft(self, ps: PeerState, topics: list[str], out: Control) -> None:
        c = self._config
        mesh = self._mesh
        now = time.monotonic()
        p = ps.peer_id
        for topic in topics:
            self._counters["graft_received"] += 1
            if not mesh.joined(topic):
                # Not subscribed: refuse without a penalty (it may have raced our leave).
                out.prune.append(make_prune(ps, topic, c.prune_backoff_s))
                continue
            if mesh.in_mesh(topic, p):
                continue
            until = mesh.backoff_until(topic, p)
            if until > now:
                # A GRAFT soon after the PRUNE is a flood, not a clock skew: penalised twice.
                flood = until - now > math.ceil(c.prune_backoff_s) - c.graft_flood_threshold_s
                self._scores.penalise_behaviour(p, "GRAFT during backoff",
                                                2.0 if flood else 1.0)
                mesh.add_backoff(topic, p, c.prune_backoff_s)
                out.prune.append(make_prune(ps, topic, c.prune_backoff_s))
                continue
            # A full mesh still takes a GRAFT over a connection we opened: otherwise a
            # late joiner finds every mesh full and stays below D_low until the backoffs
            # expire. The heartbeat prunes the excess. Only connections we opened, so
            # peers that dial us in numbers cannot take our mesh over (as go-libp2p).
            if self._scores.score(p) < 0 or (mesh.size(topic) >= c.D_high
                                             and not mesh.dialled(p)):
                mesh.add_backoff(topic, p, c.prune_backoff_s)
                out.prune.append(make_prune(ps, topic, c.prune_backoff_s))
                continue
            mesh.add(topic, p)
        self._counters["prune_sent"] += len(out.prune)

    def _on_prune(self, ps: PeerState, prunes: list[Prune]) -> None:
        c = self._config
        for pr in prunes:
            self._counters["prune_received"] += 1
            self._mesh.discard(pr.topic, ps.peer_id)
            backoff = c.prune_backoff_s if pr.backoff_s is None else min(pr.backoff_s, 3600)
            # Only for topics we take part in: the backoff map stays bounded.
            if self._mesh.joined(pr.topic) or self._mesh.in_fanout(pr.topic):
                self._mesh.add_backoff(pr.topic, ps.peer_id, backoff)
            if pr.peers:
                # Peer exchange is optional; we connect only to configured peers.
                self._counters["px_ignored"] += 1

    def _on_idontwant(self, ps: PeerState, lists: list[list[bytes]]) -> None:
        if ps.proto != MESHSUB_12:
            return
        hb = self._clock()
        for ids in lists:
            for mid in ids:
                self._counters["idontwant_received"] += 1
                ps.dont_send[mid] = hb
                if len(ps.dont_send) > self._config.max_idontwant:
                    ps.dont_send.popitem(last=False)

    def _send_messages(self, ps: PeerState, msgs: list[Message]) -> None:
        """Send messages in RPCs that stay below max_transmit_size."""
        limit = self._config.max_transmit_size - 64
        batch: list[Message] = []
        size = 0
        for m in msgs:
            n = len(m.raw) + 8
            if batch and size + n > limit:
                self._peers.enqueue(ps, frame(RPC(publish=batch).encode()))
                batch, size = [], 0
            batch.append(m)
            size += n
        if batch:
            self._peers.enqueue(ps, frame(RPC(publish=batch).encode()))
