"""pubmote's asyncio-native libp2p stack: identity, multiaddr, TCP, multistream-select,
Noise, Yamux, Identify, Ping and a host with a connection manager.

The GossipSub layer builds on `Host` (see host.py): it registers stream handlers, opens
streams to peers and listens to connection events.
"""

from .connmgr import Backoff, Connection
from .errors import (
    DialError,
    HandshakeError,
    MeshError,
    NegotiationError,
    ProtocolError,
    StreamReset,
)
from .host import CONNECTED, DISCONNECTED, IDENTIFIED, Host, HostConfig, PeerEvent
from .identify import IdentifyInfo
from .identity import KeyPair, PeerId, PublicKey, load_or_create_key
from .multiaddr import Multiaddr
from .yamux import Stream, YamuxConfig

__all__ = [
    "CONNECTED", "DISCONNECTED", "IDENTIFIED", "Backoff", "Connection", "DialError",
    "HandshakeError", "Host", "HostConfig", "IdentifyInfo", "KeyPair", "MeshError",
    "Multiaddr", "NegotiationError", "PeerEvent", "PeerId", "ProtocolError", "PublicKey",
    "Stream", "StreamReset", "YamuxConfig", "load_or_create_key",
]
