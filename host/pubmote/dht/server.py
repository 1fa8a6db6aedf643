"""The query server of the main DHT: answers ping, find_node, get_peers, announce_peer,
get and put (BEP 5, BEP 44) from the routing table, the announce store and the item store,
with write tokens checked. BEP 50 topic overlays answer their own (bep50.py), with the
same tokens."""

from __future__ import annotations

from typing import Any

from pubmote.dht import bencode, bep44, krpc
from pubmote.dht.krpc import METHOD_UNKNOWN, PROTOCOL_ERROR, Addr, KrpcError, Message
from pubmote.dht.peerstore import PeerStore
from pubmote.dht.routing import K, RoutingTable


class QueryServer:
    """Answers the main DHT's queries; the node sends what it returns."""

    def __init__(self, *, table: RoutingTable, store: bep44.ItemStore, peer_store: PeerStore,
                 tokens: bep44.Tokens, counters: dict[str, int]) -> None:
        self._table = table
        self._store = store
        self._peer_store = peer_store
        self._tokens = tokens
        self._counters = counters

    def handle(self, msg: Message, src: Addr) -> dict[bytes, Any]:
        """The main DHT's answer to one query; KrpcError for an error answer."""
        a = msg.args
        sender = msg.sender_id
        if sender is not None and not a.get(b"ro"):  # read-only nodes are not routed to
            self._table.heard_from(sender, src)
        m = msg.method
        if m == b"ping":
            return {}
        if m == b"find_node":
            target = _id_arg(a, b"target")
            return {b"nodes": compact_closest(self._table, target)}
        if m == b"get_peers":
            ih = _id_arg(a, b"info_hash")
            r: dict[bytes, Any] = {b"token": self._tokens.make(src[0]),
                                   b"nodes": compact_closest(self._table, ih)}
            peers = self._peer_store.get(ih)
            if peers:
                r[b"values"] = [krpc.compact_peer(p) for p in peers]
            return r
        if m == b"announce_peer":
            ih = _id_arg(a, b"info_hash")
            self.check_token(src, a)
            port = a.get(b"port")
            if a.get(b"implied_port"):
                port = src[1]
            if not isinstance(port, int) or not 0 < port < 65536:
                raise KrpcError(PROTOCOL_ERROR, "bad port")
            self._peer_store.add(ih, (src[0], port))
            return {}
        if m == b"get":
            target = _id_arg(a, b"target")
            r = {b"token": self._tokens.make(src[0]),
                 b"nodes": compact_closest(self._table, target)}
            r.update(self.stored_fields(target, a.get(b"seq")))
            return r
        if m == b"put":
            self.check_token(src, a)
            if b"k" in a:
                item, cas = bep44.put_item(a)
                self._store.put_mutable(item, cas)
            else:
                if b"v" not in a:
                    raise KrpcError(PROTOCOL_ERROR, "missing v")
                v = bencode.encode(a[b"v"])
                if len(v) > bep44.MAX_V:
                    raise KrpcError(krpc.MESSAGE_TOO_BIG, "message (v field) too big")
                self._store.put_immutable(v)
            return {}
        raise KrpcError(METHOD_UNKNOWN, "method unknown")

    def stored_fields(self, target: bytes, seq: Any) -> dict[bytes, Any]:
        """A get answer's item fields: the mutable item unless the asker's seq is as new."""
        item = self._store.get_mutable(target)
        if item is not None:
            if isinstance(seq, int) and seq >= item.seq:
                return {b"seq": item.seq}
            return item.get_fields()
        v = self._store.immutable.get(target)
        if v is not None:
            return {b"v": bencode.decode(v)}
        return {}

    def check_token(self, src: Addr, a: dict[bytes, Any]) -> None:
        if not self._tokens.check(src[0], a.get(b"token")):
            self._counters["bad_token"] += 1
            raise KrpcError(PROTOCOL_ERROR, "invalid token")


def compact_closest(table: RoutingTable, target: bytes, count: int = K) -> bytes:
    """The compact node info of table's count nodes nearest target."""
    # BEP 5 nodes are IPv4; IPv6 entries would need `nodes6`
    return krpc.compact_nodes((n.id, n.addr) for n in table.closest(target, count)
                              if ":" not in n.addr[0])


def _id_arg(a: dict[bytes, Any], name: bytes) -> bytes:
    v = a.get(name)
    if not isinstance(v, bytes) or len(v) != 20:
        raise KrpcError(PROTOCOL_ERROR, "%s must be a 20-byte string" % name.decode())
    return v

