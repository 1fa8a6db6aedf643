"""Peer events: a Host tells its listeners (GossipSub, the mesh relay) when a peer connects,
is identified or disconnects."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from pubmote.p2p.connmgr import Connection
from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identity import PeerId

log = logging.getLogger("pubmote.p2p.host")

CONNECTED = "connected"
IDENTIFIED = "identified"
DISCONNECTED = "disconnected"


class PeerEvent:
    """A change in our connections: kind is CONNECTED, IDENTIFIED or DISCONNECTED."""

    __slots__ = ("kind", "peer_id", "connection", "info")

    def __init__(self, kind: str, peer_id: PeerId, connection: Connection,
                 info: IdentifyInfo | None = None) -> None:
        self.kind = kind
        self.peer_id = peer_id
        self.connection = connection
        self.info = info

    def __repr__(self) -> str:
        return "PeerEvent(%s, %s)" % (self.kind, self.peer_id)


EventHandler = Callable[[PeerEvent], None]


class PeerEvents:
    """The listeners for peer events; one that fails is logged and the rest still run."""

    def __init__(self) -> None:
        self._handlers: list[EventHandler] = []

    def add(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def remove(self, handler: EventHandler) -> None:
        with contextlib.suppress(ValueError):
            self._handlers.remove(handler)

    def emit(self, event: PeerEvent) -> None:
        for h in list(self._handlers):
            try:
                h(event)
            except Exception:
                log.exception("mesh: event handler failed on %r", event)
