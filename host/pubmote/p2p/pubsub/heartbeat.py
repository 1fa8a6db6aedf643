"""The GossipSub heartbeat: mesh maintenance (graft up to D_low, prune down from D_high,
by score), fanout expiry, IHAVE gossip to D_lazy non-mesh peers, score decay, broken IWANT
promises, seen-cache and backoff expiry."""

from __future__ import annotations

import asyncio
import logging
import math
import time

from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.base import RouterBase
from pubmote.p2p.pubsub.rpc import Control

log = logging.getLogger("pubmote.p2p.pubsub")


class MeshMaintenance(RouterBase):
    """Runs the heartbeat."""

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
            # at least D_out of the peers we dialled stay (they are hard to take over)
            dialled = [p for p in rest[c.D - c.D_score:] if self._dialled(p)]
            need = c.d_out - sum(1 for p in keep if self._dialled(p))
            for p in dialled[:max(0, need)]:
                swap = next((q for q in reversed(keep[c.D_score:]) if not self._dialled(q)), None)
                if swap is None:
                    break
                keep[keep.index(swap)] = p
            for p in peers:
                if p in keep:
                    continue
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
