"""GossipSub's gossip: the message cache, IHAVE announcements of its newest windows to
D_lazy peers outside the mesh, IWANT requests for ids announced to us (each a promise the
announcer must keep within iwant_followup_s) and IWANT answers from the cache."""

from __future__ import annotations

import math
import random
import time

from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import GossipConfig
from pubmote.p2p.pubsub.mesh import Mesh
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import Control, Message
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import MessageCache, PeerState, SeenCache

IHaves = dict[PeerId, list[tuple[str, list[bytes]]]]


class Gossip:
    """The message cache and the IWANT promises; answers IHAVE and IWANT."""

    def __init__(self, *, config: GossipConfig, peers: PeerTable, mesh: Mesh,
                 scores: PeerScores, seen: SeenCache, rng: random.Random,
                 counters: dict[str, int]) -> None:
        self._config = config
        self._peers = peers
        self._mesh = mesh
        self._scores = scores
        self._seen = seen
        self._rng = rng
        self._counters = counters
        self._mcache = MessageCache(config.mcache_len, config.mcache_gossip)
        self._promises: dict[bytes, tuple[PeerId, float]] = {}

    def put(self, mid: bytes, msg: Message) -> None:
        """Cache a message we published or accepted, for IWANT answers and gossip."""
        self._mcache.put(mid, msg)

    def get(self, mid: bytes) -> Message | None:
        return self._mcache.get(mid)

    def arrived(self, mid: bytes) -> None:
        """A message came: whoever promised it is let off."""
        self._promises.pop(mid, None)

    def on_ihave(self, ps: PeerState, ihaves: list[tuple[str, list[bytes]]],
                 out: Control) -> None:
        c = self._config
        if not ihaves or self._scores.score(ps.peer_id) < c.gossip_threshold:
            return
        want: list[bytes] = []
        for topic, ids in ihaves:
            ps.ihave_seen += 1
            if ps.ihave_seen > c.max_ihave_messages:
                break
            if not self._mesh.joined(topic):
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
        self._counters["iwant_sent"] += len(want)
        deadline = time.monotonic() + c.iwant_followup_s
        # A promise per id; broken ones are penalised once per peer per heartbeat.
        for mid in want:
            if len(self._promises) < 8 * c.max_ihave_length:
                self._promises[mid] = (ps.peer_id, deadline)

    def on_iwant(self, ps: PeerState, iwants: list[list[bytes]]) -> list[Message]:
        """The cached messages ps asks for (each sent to it at most
        gossip_retransmission times)."""
        c = self._config
        if not iwants or self._scores.score(ps.peer_id) < c.gossip_threshold:
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
        self._counters["iwant_served"] += len(out)
        return out

    def ihaves(self) -> IHaves:
        """The heartbeat's IHAVEs: the newest windows' ids, by topic, each to D_lazy (or
        gossip_factor of the) subscribers outside the mesh or fanout."""
        c = self._config
        score = self._scores.score
        out: IHaves = {}
        for topic, ids in self._mcache.gossip_ids().items():
            exclude = self._mesh.gossip_excluded(topic)
            if exclude is None:
                continue
            cands = [p for p in self._peers.subscribers(topic)
                     if p not in exclude and (ps := self._peers.get(p)) is not None
                     and ps.is_gossip and score(p) >= c.gossip_threshold]
            if not cands:
                continue
            n = max(c.D_lazy, math.ceil(c.gossip_factor * len(cands)))
            chosen = self._rng.sample(cands, min(n, len(cands)))
            told = ids if len(ids) <= c.max_ihave_length else self._rng.sample(
                ids, c.max_ihave_length)
            for p in chosen:
                out.setdefault(p, []).append((topic, told))
                self._counters["ihave_sent"] += 1
        return out

    def check_promises(self, now: float) -> None:
        """Penalise, once per heartbeat, each peer that did not send what it announced."""
        broken: set[PeerId] = set()
        for mid, (peer, deadline) in list(self._promises.items()):
            if deadline <= now:
                del self._promises[mid]
                broken.add(peer)
        for peer in broken:
            self._counters["broken_promises"] += 1
            self._scores.penalise_behaviour(peer, "IWANT promise broken")

    def shift(self) -> None:
        """The heartbeat's turn of the cache's windows."""
        self._mcache.shift()
