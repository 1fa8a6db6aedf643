"""GossipSub's mesh and fanout: which peers carry each topic we subscribe to (the mesh,
kept between D_low and D_high by score, with at least D_out peers we dialled) or publish
to without subscribing (the fanout, forgotten after fanout_ttl_s); GRAFT backoffs; where a
published or forwarded message goes."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable

from pubmote.p2p.connmgr import OUTBOUND
from pubmote.p2p.host import Host
from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import MESHSUB_10, MESHSUB_12, GossipConfig
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import RPC, Control, Message, Prune, frame
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import PeerState


def make_prune(ps: PeerState, topic: str, backoff_s: float) -> Prune:
    # v1.0 peers do not know the backoff field; v1.1+ learn how long to stay away.
    return Prune(topic, backoff_s=None if ps.proto == MESHSUB_10 else math.ceil(backoff_s))


class Mesh:
    """The mesh and fanout peers by topic and the backoffs; sends the GRAFTs and PRUNEs
    its own changes call for."""

    def __init__(self, *, config: GossipConfig, host: Host, peers: PeerTable,
                 scores: PeerScores, rng: random.Random, counters: dict[str, int]) -> None:
        self._config = config
        self._host = host
        self._peers = peers
        self._scores = scores
        self._rng = rng
        self._counters = counters
        self._mesh: dict[str, set[PeerId]] = {}
        self._fanout: dict[str, set[PeerId]] = {}
        self._fanout_last: dict[str, float] = {}
        self._backoff: dict[tuple[str, PeerId], float] = {}

    # -- reading ------------------------------------------------------------------------
    def joined(self, topic: str) -> bool:
        """Whether we subscribe to topic (we hold a mesh for it)."""
        return topic in self._mesh

    def mesh_peers(self, topic: str) -> list[PeerId]:
        return list(self._mesh.get(topic, ()))

    def fanout_peers(self, topic: str) -> list[PeerId]:
        return list(self._fanout.get(topic, ()))

    def size(self, topic: str) -> int:
        return len(self._mesh.get(topic, ()))

    def in_mesh(self, topic: str, peer: PeerId) -> bool:
        m = self._mesh.get(topic)
        return m is not None and peer in m

    def in_fanout(self, topic: str) -> bool:
        return topic in self._fanout

    def gossip_excluded(self, topic: str) -> set[PeerId] | None:
        """The peers IHAVE gossip about topic skips (its mesh, else its fanout); None when
        we neither subscribe nor publish to it."""
        exclude = self._mesh.get(topic)
        return exclude if exclude is not None else self._fanout.get(topic)

    def backoff_until(self, topic: str, peer: PeerId) -> float:
        return self._backoff.get((topic, peer), 0.0)

    def dialled(self, p: PeerId) -> bool:
        """Whether our connection to p is one we opened (an outbound connection)."""
        conn = self._host.connection(p)
        return conn is not None and conn.direction == OUTBOUND

    def graftable(self, p: PeerId, topic: str, now: float) -> bool:
        ps = self._peers.get(p)
        # We wait two heartbeats past a backoff before grafting (the spec's slack): the
        # peer checks our GRAFT against its own clock and copy of the same backoff.
        slack = 2 * self._config.heartbeat_s
        return (ps is not None and ps.is_gossip
                and self._backoff.get((topic, p), -slack) + slack <= now
                and self._scores.score(p) >= 0)

    # -- changing -----------------------------------------------------------------------
    def add_backoff(self, topic: str, peer: PeerId, seconds: float) -> None:
        # Whole seconds, as the PRUNE carries them: both ends hold the same backoff.
        until = time.monotonic() + math.ceil(seconds)
        key = (topic, peer)
        if self._backoff.get(key, 0.0) < until:
            self._backoff[key] = until

    def add(self, topic: str, peer: PeerId) -> None:
        """peer joins our mesh of topic (a GRAFT we accepted)."""
        self._mesh[topic].add(peer)

    def discard(self, topic: str, peer: PeerId) -> None:
        """peer leaves our mesh of topic (a PRUNE it sent)."""
        mesh = self._mesh.get(topic)
        if mesh is not None:
            mesh.discard(peer)

    def drop_peer(self, peer: PeerId, topic: str | None = None) -> None:
        """peer leaves every mesh and fanout (or those of topic)."""
        for t, m in self._mesh.items():
            if topic is None or t == topic:
                m.discard(peer)
        for t, f in self._fanout.items():
            if topic is None or t == topic:
                f.discard(peer)

    def join(self, topic: str) -> None:
        """Subscribe: a mesh from our fanout peers of topic, topped up to D; GRAFTs sent."""
        c = self._config
        mesh: set[PeerId] = set()
        fan = self._fanout.pop(topic, None)
        self._fanout_last.pop(topic, None)
        now = time.monotonic()
        if fan:
            mesh |= {p for p in fan if self.graftable(p, topic, now)}
        if len(mesh) < c.D:
            cands = [p for p in self._peers.subscribers(topic)
                     if p not in mesh and self.graftable(p, topic, now)]
            mesh |= set(self._rng.sample(cands, min(c.D - len(mesh), len(cands))))
        self._mesh[topic] = mesh
        for p in mesh:
            ps = self._peers.get(p)
            assert ps is not None  # graftable
            ctl = Control()
            ctl.graft.append(topic)
            self._peers.send_control(ps, ctl)
            self._counters["graft_sent"] += 1

    def leave(self, topic: str) -> None:
        """Unsubscribe: PRUNE our mesh peers, each with the unsubscribe backoff."""
        backoff_s = self._config.unsubscribe_backoff_s
        for p in self._mesh.pop(topic, set()):
            self.add_backoff(topic, p, backoff_s)
            ps = self._peers.get(p)
            if ps is not None:
                ctl = Control()
                ctl.prune.append(make_prune(ps, topic, backoff_s))
                self._peers.send_control(ps, ctl)

    # -- where messages go --------------------------------------------------------------
    def publish_targets(self, topic: str) -> list[PeerState]:
        """Who gets a message we publish on topic: flood publishing to every subscriber
        above publish_threshold, our mesh (or fanout, made if new), floodsub peers."""
        c = self._config
        out: dict[PeerId, PeerState] = {}
        subscribers = self._peers.subscribers(topic)
        score = self._scores.score
        if c.flood_publish:
            for p in subscribers:
                ps = self._peers.get(p)
                if ps is not None and score(p) >= c.publish_threshold:
                    out[p] = ps
        if topic in self._mesh:
            peers: Iterable[PeerId] = self._mesh[topic]
        else:
            fan = self._fanout.get(topic)
            if fan is None:
                cands = [p for p in subscribers if (ps := self._peers.get(p)) is not None
                         and ps.is_gossip and score(p) >= c.publish_threshold]
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

    def forward(self, msg: Message, mid: bytes, src: PeerId, origin: PeerId) -> None:
        """Send on a message we accepted: to our mesh (not to who sent it, nor to who said
        IDONTWANT) and floodsub peers; a large one is announced to our v1.2 mesh peers with
        IDONTWANT first."""
        topic = msg.topic
        targets: list[PeerState] = []
        mesh = self._mesh.get(topic, ())
        big = len(msg.raw) >= self._config.idontwant_min_bytes
        dontwant: bytes | None = None
        for p in mesh:
            if p == src or p == origin:
                continue
            ps = self._peers.get(p)
            if ps is None:
                continue
            if mid in ps.dont_send:
                self._counters["idontwant_skipped"] += 1
                continue
            targets.append(ps)
        for p in self._peers.subscribers(topic):
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
                    self._peers.enqueue(ps, dontwant)
                    self._counters["idontwant_sent"] += 1
        if not targets:
            return
        data = frame(RPC(publish=[msg]).encode())
        for ps in targets:
            self._peers.enqueue(ps, data)
        self._counters["forwarded"] += len(targets)

    # -- the heartbeat's part -----------------------------------------------------------
    def maintain(self, now: float) -> tuple[dict[PeerId, list[str]], dict[PeerId, list[str]]]:
        """Every mesh back between D_low and D_high, every fanout refreshed: the GRAFTs
        and PRUNEs (topics by peer) the heartbeat is to send."""
        grafts: dict[PeerId, list[str]] = {}
        prunes: dict[PeerId, list[str]] = {}
        for topic, mesh in self._mesh.items():
            self._maintain_mesh(topic, mesh, now, grafts, prunes)
        self._maintain_fanout(now)
        return grafts, prunes

    def _maintain_mesh(self, topic: str, mesh: set[PeerId], now: float,
                       grafts: dict[PeerId, list[str]], prunes: dict[PeerId, list[str]]) -> None:
        c = self._config
        score = self._scores.score
        subscribers = self._peers.subscribers(topic)
        for p in list(mesh):
            if p not in self._peers or p not in subscribers:
                mesh.discard(p)
            elif score(p) < 0:
                mesh.discard(p)
                self.add_backoff(topic, p, c.prune_backoff_s)
                prunes.setdefault(p, []).append(topic)
                self._counters["prune_sent"] += 1
        if len(mesh) < c.D_low:
            cands = [p for p in subscribers if p not in mesh and self.graftable(p, topic, now)]
            for p in self._rng.sample(cands, min(c.D - len(mesh), len(cands))):
                mesh.add(p)
                grafts.setdefault(p, []).append(topic)
                self._counters["graft_sent"] += 1
        elif len(mesh) > c.D_high:
            peers = list(mesh)
            self._rng.shuffle(peers)
            # The D_score best stay; the rest of the D are chosen at random.
            peers.sort(key=score, reverse=True)
            keep = peers[:c.D_score]
            rest = peers[c.D_score:]
            self._rng.shuffle(rest)
            keep += rest[:c.D - len(keep)]
            # at least D_out of the peers we dialled stay (they are hard to take over)
            dialled = [p for p in rest[c.D - c.D_score:] if self.dialled(p)]
            need = c.d_out - sum(1 for p in keep if self.dialled(p))
            for p in dialled[:max(0, need)]:
                swap = next((q for q in reversed(keep[c.D_score:]) if not self.dialled(q)), None)
                if swap is None:
                    break
                keep[keep.index(swap)] = p
            for p in peers:
                if p in keep:
                    continue
                mesh.discard(p)
                self.add_backoff(topic, p, c.prune_backoff_s)
                prunes.setdefault(p, []).append(topic)
                self._counters["prune_sent"] += 1

    def _maintain_fanout(self, now: float) -> None:
        c = self._config
        score = self._scores.score
        for topic in list(self._fanout):
            if self._fanout_last.get(topic, 0.0) + c.fanout_ttl_s < now:
                del self._fanout[topic]
                self._fanout_last.pop(topic, None)
                continue
            fan = self._fanout[topic]
            subscribers = self._peers.subscribers(topic)
            for p in list(fan):
                if p not in subscribers or p not in self._peers \
                        or score(p) < c.publish_threshold:
                    fan.discard(p)
            if len(fan) < c.D:
                cands = [p for p in subscribers if p not in fan and (q := self._peers.get(p))
                         is not None and q.is_gossip and score(p) >= c.publish_threshold]
                fan |= set(self._rng.sample(cands, min(c.D - len(fan), len(cands))))

    def expire_backoffs(self, now: float) -> None:
        for key, until in list(self._backoff.items()):
            # Keep a little past expiry, as go does, so a GRAFT racing it is not penalised
            # late; then forget.
            if until + 2 * self._config.heartbeat_s < now:
                del self._backoff[key]
