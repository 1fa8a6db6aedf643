"""A simple peer score: invalid messages weigh by their square, misbehaviour (GRAFT during
backoff, broken IWANT promises, malformed RPCs) above a threshold too; both decay every
heartbeat. Records of departed peers are kept for retain_score_s so leaving pardons
nothing, and bounded by max_scores."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import GossipConfig
from pubmote.p2p.pubsub.state import Score

log = logging.getLogger("pubmote.p2p.pubsub")


class PeerScores:
    """The score of every peer met lately; `connected(peer)` says who is still here."""

    def __init__(self, config: GossipConfig, connected: Callable[[PeerId], bool]) -> None:
        self._config = config
        self._connected = connected
        self._scores: OrderedDict[PeerId, Score] = OrderedDict()

    def record(self, peer: PeerId) -> Score:
        """The peer's record, made if new."""
        s = self._scores.get(peer)
        if s is None:
            s = self._scores[peer] = Score()
            if len(self._scores) > self._config.max_scores:
                # Forget the oldest records of peers that are gone (a connected peer's
                # record stays: forgetting it would pardon it).
                excess = len(self._scores) - self._config.max_scores
                for old in [p for p in self._scores if not self._connected(p)][:excess]:
                    del self._scores[old]
        return s

    def score(self, peer: PeerId) -> float:
        """The peer's score (0 when unknown); see GossipConfig for the weights."""
        s = self._scores.get(peer)
        if s is None:
            return 0.0
        c = self._config
        over = max(0.0, s.behaviour - c.behaviour_penalty_threshold)
        return (c.invalid_message_weight * s.invalid * s.invalid
                + c.behaviour_penalty_weight * over * over)

    def penalise_invalid(self, peer: PeerId | None, why: str) -> None:
        if peer is None:
            return
        self.record(peer).invalid += 1.0
        log.info("gossipsub: %s from %s (score now %.1f)", why, peer, self.score(peer))

    def penalise_behaviour(self, peer: PeerId, why: str, amount: float = 1.0) -> None:
        self.record(peer).behaviour += amount
        log.debug("gossipsub: %s by %s (score now %.1f)", why, peer, self.score(peer))

    def left(self, peer: PeerId) -> None:
        """The peer went away: its record is kept retain_score_s from now."""
        sc = self._scores.get(peer)
        if sc is not None:
            sc.last_seen = time.monotonic()

    def decay(self, now: float) -> None:
        d = self._config.score_decay
        retain = self._config.retain_score_s
        for peer, s in list(self._scores.items()):
            if s.invalid:
                s.invalid = s.invalid * d if s.invalid > 0.01 else 0.0
            if s.behaviour:
                s.behaviour = s.behaviour * d if s.behaviour > 0.01 else 0.0
            if not self._connected(peer) and s.last_seen + retain < now:
                del self._scores[peer]
