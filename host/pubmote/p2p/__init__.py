"""pubmote's asyncio-native libp2p stack: identity, multiaddr, TCP, multistream-select,
Noise, Yamux, Identify, Ping and a host with a connection manager.

The GossipSub layer builds on `Host` (see host.py): it registers stream handlers, opens
streams to peers and listens to connection events.
"""

from pubmote.p2p.connmgr import Backoff, Connection
from pubmote.p2p.errors import (
    DialError,
    HandshakeError,
    MeshError,
    NegotiationError,
    ProtocolError,
    StreamReset,
)
from pubmote.p2p.events import CONNECTED, DISCONNECTED, IDENTIFIED, PeerEvent
from pubmote.p2p.host import Host
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identity import KeyPair, PeerId, PublicKey, load_or_create_key
from pubmote.p2p.multiaddr import Multiaddr
from pubmote.p2p.yamux import Stream, YamuxConfig

__all__ = [
    "CONNECTED", "DISCONNECTED", "IDENTIFIED", "Backoff", "Connection", "DialError",
    "HandshakeError", "Host", "HostConfig", "IdentifyInfo", "KeyPair", "MeshError",
    "Multiaddr", "NegotiationError", "PeerEvent", "PeerId", "ProtocolError", "PublicKey",
    "Stream", "StreamReset", "YamuxConfig", "load_or_create_key",
]
