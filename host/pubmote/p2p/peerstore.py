"""The peer store: what identify told us about each peer and where it listens, both
bounded by max_known_peers (the least recently told go first)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from pubmote.p2p.identify import IdentifyInfo
from pubmote.p2p.identity import PeerId
from pubmote.p2p.multiaddr import Multiaddr


class PeerStore:
    """Peers' identify answers and addresses (at most 16 each)."""

    def __init__(self, max_known_peers: int) -> None:
        self._max = max_known_peers
        self._info: OrderedDict[PeerId, IdentifyInfo] = OrderedDict()
        self._addrs: OrderedDict[PeerId, list[Multiaddr]] = OrderedDict()

    def info(self, peer: PeerId) -> IdentifyInfo | None:
        return self._info.get(peer)

    def remember(self, peer: PeerId, info: IdentifyInfo) -> None:
        """Keep peer's identify answer and the addresses it listens on."""
        self._info[peer] = info
        self._info.move_to_end(peer)
        while len(self._info) > self._max:
            self._info.popitem(last=False)
        self.add_addrs(peer, info.listen_addrs)

    def add_addrs(self, peer: PeerId, addrs: Sequence[Multiaddr]) -> None:
        known = self._addrs.pop(peer, [])
        for given in addrs:
            a = given.without_p2p()
            if a not in known:
                known.append(a)
        self._addrs[peer] = known[-16:]
        while len(self._addrs) > self._max:
            self._addrs.popitem(last=False)

    def addrs(self, peer: PeerId) -> list[Multiaddr]:
        return list(self._addrs.get(peer, []))
