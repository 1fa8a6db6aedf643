"""The GossipSub heartbeat: score decay, broken IWANT promises, per-peer allowances reset,
mesh maintenance (graft up to D_low, prune down from D_high, by score) and fanout expiry
(mesh.py), IHAVE gossip to D_lazy non-mesh peers (gossip.py), then the caches' expiry."""

from __future__ import annotations

import asyncio
import logging
import time

from pubmote.p2p.pubsub.config import GossipConfig
from pubmote.p2p.pubsub.gossip import Gossip
from pubmote.p2p.pubsub.mesh import Mesh, make_prune
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import Control
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import SeenCache

log = logging.getLogger("pubmote.p2p.pubsub")


class Heartbeat:
    """Runs the router's periodic maintenance and counts its rounds (the router's clock
    for backoffs, caches and scores)."""

    def __init__(self, *, config: GossipConfig, peers: PeerTable, mesh: Mesh, gossip: Gossip,
                 scores: PeerScores, seen: SeenCache) -> None:
        self._config = config
        self._peers = peers
        self._mesh = mesh
        self._gossip = gossip
        self._scores = scores
        self._seen = seen
        self.count = 0

    async def run(self) -> None:
        """Beat every heartbeat_s until cancelled."""
        await asyncio.sleep(self._config.heartbeat_initial_delay_s)
        while True:
            try:
                self.beat()
            except Exception:
                log.exception("gossipsub: heartbeat failed")
            await asyncio.sleep(self._config.heartbeat_s)

    def beat(self) -> None:
        """One round of maintenance."""
        c = self._config
        now = time.monotonic()
        self.count += 1
        self._scores.decay(now)
        self._gossip.check_promises(now)
        for ps in self._peers:
            ps.ihave_seen = 0
            ps.iwant_asked = 0
            if ps.dont_send:
                old = self.count - c.idontwant_ttl_heartbeats
                while ps.dont_send and next(iter(ps.dont_send.values())) < old:
                    ps.dont_send.popitem(last=False)
        grafts, prunes = self._mesh.maintain(now)
        ihaves = self._gossip.ihaves()
        for p in set(grafts) | set(prunes) | set(ihaves):
            target = self._peers.get(p)
            if target is None:
                continue
            ctl = Control()
            ctl.graft = grafts.get(p, [])
            ctl.prune = [make_prune(target, t, c.prune_backoff_s) for t in prunes.get(p, [])]
            ctl.ihave = ihaves.get(p, [])
            self._peers.send_control(target, ctl)
        self._gossip.shift()
        self._seen.expire(now)
        self._mesh.expire_backoffs(now)
