"""GossipSub's protocol ids and router parameters (libp2p/specs pubsub/gossipsub v1.1, the
spec's names with units)."""

from __future__ import annotations

from dataclasses import dataclass

from pubmote.p2p.pubsub.messages import MsgIdFn

MESHSUB_12 = "/meshsub/1.2.0"
MESHSUB_11 = "/meshsub/1.1.0"
MESHSUB_10 = "/meshsub/1.0.0"
FLOODSUB = "/floodsub/1.0.0"
PROTOCOLS = (MESHSUB_12, MESHSUB_11, MESHSUB_10, FLOODSUB)


class PublishRejected(ValueError):
    """A local validator did not accept a message we were about to publish."""


@dataclass
class GossipConfig:
    """Router parameters (the GossipSub spec's defaults and names, with units)."""

    D: int = 6
    D_low: int = 4
    D_high: int = 12
    D_lazy: int = 6
    D_score: int = 4                     # kept by score when pruning an oversized mesh
    D_out: int | None = None             # peers we dialled, kept when pruning (< D_low);
                                         # default min(2, D_low - 1, D // 2)
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
        if self.D_score > self.D:
            raise ValueError("need D_score <= D")
        if self.D_out is not None and not (0 <= self.D_out < self.D_low
                                           and self.D_out <= self.D // 2):
            raise ValueError("need 0 <= D_out < D_low and D_out <= D/2")
        if self.mcache_gossip > self.mcache_len or self.mcache_len < 1:
            raise ValueError("need 1 <= mcache_gossip <= mcache_len")
        if self.heartbeat_s <= 0:
            raise ValueError("heartbeat_s must be positive")

    @property
    def d_out(self) -> int:
        """D_out, or its default for this D and D_low."""
        if self.D_out is not None:
            return self.D_out
        return max(0, min(2, self.D_low - 1, self.D // 2))
