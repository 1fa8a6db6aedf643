"""GossipSub control messages: GRAFT and PRUNE (mesh membership, with backoff), IHAVE and
IWANT (gossip, with promises), IDONTWANT (v1.2)."""

from __future__ import annotations

import logging
import math
import time

from pubmote.p2p.pubsub.base import RouterBase
from pubmote.p2p.pubsub.config import MESHSUB_12
from pubmote.p2p.pubsub.rpc import RPC, Control, Message, Prune, frame
from pubmote.p2p.pubsub.state import PeerState

log = logging.getLogger("pubmote.p2p.pubsub")


class ControlHandling(RouterBase):
    """Answers the control part of each RPC."""

    def _handle_control(self, ps: PeerState, ctl: Control) -> None:
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

    def _on_graft(self, ps: PeerState, topics: list[str], out: Control) -> None:
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
            # A full mesh still takes a GRAFT over a connection we opened: otherwise a
            # late joiner finds every mesh full and stays below D_low until the backoffs
            # expire. The heartbeat prunes the excess. Only connections we opened, so
            # peers that dial us in numbers cannot take our mesh over (as go-libp2p).
            if self.score(p) < 0 or (len(mesh) >= c.D_high and not self._dialled(p)):
                self._add_backoff(topic, p, c.prune_backoff_s)
                out.prune.append(self._make_prune(ps, topic, c.prune_backoff_s))
                continue
            mesh.add(p)
        self.counters["prune_sent"] += len(out.prune)

    def _on_prune(self, ps: PeerState, prunes: list[Prune]) -> None:
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

    def _on_ihave(self, ps: PeerState, ihaves: list[tuple[str, list[bytes]]], out: Control) -> None:
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

    def _on_iwant(self, ps: PeerState, iwants: list[list[bytes]]) -> list[Message]:
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

    def _on_idontwant(self, ps: PeerState, lists: list[list[bytes]]) -> None:
        if ps.proto != MESHSUB_12:
            return
        hb = self._heartbeats
        for ids in lists:
            for mid in ids:
                self.counters["idontwant_received"] += 1
                ps.dont_send[mid] = hb
                if len(ps.dont_send) > self.config.max_idontwant:
                    ps.dont_send.popitem(last=False)

    def _send_messages(self, ps: PeerState, msgs: list[Message]) -> None:
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
