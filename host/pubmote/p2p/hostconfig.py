"""The limits and timeouts of a libp2p Host (host.py): connection caps, inbound handshake
and negotiation timeouts, dial backoff, keepalive pings."""

from __future__ import annotations

from pubmote import __version__
from pubmote.p2p.connmgr import Backoff
from pubmote.p2p.yamux import YamuxConfig


class HostConfig:
    """Limits and timeouts of a Host (keyword-only; defaults suit a gateway)."""

    def __init__(self, *, max_connections: int = 128, max_pending_inbound: int = 32,
                 max_inbound_per_ip: int = 8,
                 handshake_timeout_s: float = 10.0, dial_timeout_s: float = 10.0,
                 negotiate_timeout_s: float = 10.0, identify_timeout_s: float = 10.0,
                 identify_on_connect: bool = True, backoff: Backoff | None = None,
                 yamux_config: YamuxConfig | None = None, max_known_peers: int = 4096,
                 keepalive_interval_s: float = 30.0, keepalive_timeout_s: float = 10.0,
                 agent_version: str = "pubmote/" + __version__) -> None:
        self.max_connections = max_connections
        self.max_pending_inbound = max_pending_inbound
        self.max_inbound_per_ip = max_inbound_per_ip  # pending and established, per address
        self.handshake_timeout_s = handshake_timeout_s
        self.dial_timeout_s = dial_timeout_s
        self.negotiate_timeout_s = negotiate_timeout_s
        self.identify_timeout_s = identify_timeout_s
        self.identify_on_connect = identify_on_connect
        self.backoff = backoff or Backoff()
        self.yamux_config = yamux_config or YamuxConfig()
        self.max_known_peers = max_known_peers
        # Yamux pings on idle and busy connections alike: a peer that vanished without a
        # FIN (power cut, cable) is found within interval + timeout. 0 disables.
        self.keepalive_interval_s = keepalive_interval_s
        self.keepalive_timeout_s = keepalive_timeout_s
        self.agent_version = agent_version
