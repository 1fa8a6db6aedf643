"""Iterative Kademlia lookups (BEP 5 find_node and get_peers, BEP 44 get): ask the alpha
nearest unasked candidates at a time until the k nearest known have all answered or
failed; gather tokens, peers and the newest valid item on the way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pubmote.dht import bencode, bep44, krpc
from pubmote.dht.krpc import Addr, KrpcError, Message
from pubmote.dht.peerstore import MAX_PEERS_PER_HASH, MAX_VALUES_REPLY
from pubmote.dht.routing import K, RoutingTable, distance

ALPHA = 3  # concurrent queries per lookup (BEP 5 / Kademlia)
MAX_SHORTLIST = 64  # candidates a lookup keeps

# query(addr, method, args, topic): the answer Message, or None on timeout
Query = Callable[[Addr, bytes, dict[bytes, Any], "bytes | None"], Awaitable["Message | None"]]


class Found:
    """One node that answered a lookup: its id, address and write token."""

    __slots__ = ("id", "addr", "token")

    def __init__(self, nid: bytes, addr: Addr, token: bytes | None) -> None:
        self.id = nid
        self.addr = addr
        self.token = token


class LookupResult:
    """What an iterative lookup found: the nearest nodes that answered (with tokens),
    peers (get_peers), and the newest valid mutable item (get)."""

    def __init__(self) -> None:
        self.nodes: list[Found] = []
        self.peers: list[Addr] = []
        self.item: bep44.MutableItem | None = None
        self.immutable: bytes | None = None
        self.queried = 0


async def lookup(query: Query, table: RoutingTable, own_id: bytes, target: bytes,
                 method: bytes = b"find_node", *, topic: bytes | None = None,
                 args: dict[bytes, Any] | None = None, seeds: Iterable[Addr] = (),
                 salt: bytes = b"", key: bytes | None = None, k: int = K,
                 alpha: int = ALPHA) -> LookupResult:
    """Iterative Kademlia lookup of target with find_node, get_peers or get, asking
    through `query` the network whose routing table is `table` (the main DHT's or
    `topic`'s); `own_id` is never asked.

    For get with `key`, answers carrying the item (k, seq, sig, v) are checked against
    key/salt/signature and the newest is kept in the result.
    """
    res = LookupResult()
    qargs = dict(args or {})
    qargs[b"info_hash" if method == b"get_peers" else b"target"] = target
    t_int = int.from_bytes(target, "big")
    far = 1 << 161  # seeds whose id we do not know sort last
    cand: dict[Addr, int] = {}
    ids: dict[Addr, bytes] = {}
    for n in table.closest(target, k * 2):
        cand[n.addr] = distance(n.id, target)
        ids[n.addr] = n.id
    for s in seeds:
        cand.setdefault(s, far)
    asked: set[Addr] = set()
    answered: dict[Addr, Found] = {}
    peers: dict[Addr, None] = {}
    inflight: dict[asyncio.Task[Message | None], Addr] = {}

    def next_batch() -> list[Addr]:
        order = sorted(cand, key=lambda x: cand[x])
        # done once the k nearest known candidates were all asked
        top = order[:k]
        return [x for x in top if x not in asked]

    while True:
        for addr in next_batch():
            if len(inflight) >= alpha:
                break
            asked.add(addr)
            task = asyncio.ensure_future(query(addr, method, qargs, topic))
            inflight[task] = addr
        if not inflight:
            break
        done, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            addr = inflight.pop(task)
            res.queried += 1
            reply = task.result() if not task.cancelled() else None
            if reply is None or reply.kind != b"r" or reply.sender_id is None:
                cand.pop(addr, None)
                continue
            r = reply.args
            nid = reply.sender_id
            cand[addr] = distance(nid, target)
            tok = r.get(b"token")
            answered[addr] = Found(nid, addr, tok if isinstance(tok, bytes) else None)
            with contextlib.suppress(KrpcError):
                for cid, caddr in krpc.parse_nodes(r.get(b"nodes", b"")):
                    if caddr not in cand and caddr not in asked and cid != own_id:
                        cand[caddr] = int.from_bytes(cid, "big") ^ t_int
            if method == b"get_peers":
                _take_peers(r, peers)
            elif method == b"get":
                _take_item(r, res, target, salt, key)
        _trim(cand)
    res.nodes = sorted(answered.values(), key=lambda f: distance(f.id, target))[:k]
    res.peers = list(peers)[:MAX_PEERS_PER_HASH]
    return res


def _take_peers(r: dict[bytes, Any], peers: dict[Addr, None]) -> None:
    # a get_peers answer's values: compact peer addresses, the malformed ones skipped
    vals = r.get(b"values")
    if isinstance(vals, list):
        for p in vals[:MAX_VALUES_REPLY]:
            with contextlib.suppress(KrpcError, ValueError):
                if isinstance(p, bytes):
                    peers[krpc.parse_peer(p)] = None


def _take_item(r: dict[bytes, Any], res: LookupResult, target: bytes, salt: bytes,
               key: bytes | None) -> None:
    # a get answer's item: with key, the newest mutable item whose signature holds;
    # without, the immutable value whose hash is the target. A forged or broken item is
    # not a lookup failure: it is passed over
    if key is not None and b"sig" in r:
        try:
            item = bep44.item_from_fields(r, salt)
        except KrpcError:
            return
        if item.key == key and (res.item is None or item.seq > res.item.seq):
            res.item = item
    elif key is None and b"v" in r:
        with contextlib.suppress(bencode.BencodeError):
            v = bencode.encode(r[b"v"])
            if bep44.immutable_target(v) == target:
                res.immutable = v


def _trim(cand: dict[Addr, int]) -> None:
    # keep the nearest MAX_SHORTLIST candidates; what was asked stays asked
    if len(cand) > MAX_SHORTLIST:
        for x in sorted(cand, key=lambda x: cand[x])[MAX_SHORTLIST:]:
            del cand[x]
