"""KRPC (BEP 5): query, response and error messages, compact node/peer info, and the
table of outstanding transactions (futures keyed by transaction id, bounded).

Sans-IO: `parse` turns datagram bytes into a `Message` or raises `KrpcError` with the
BEP error code to answer with; the node decides what to send.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from collections.abc import Iterable
from typing import Any

from pubmote.dht import bencode

# BEP 5 error codes
GENERIC_ERROR = 201
SERVER_ERROR = 202
PROTOCOL_ERROR = 203
METHOD_UNKNOWN = 204
# BEP 44 error codes
MESSAGE_TOO_BIG = 205  # v longer than 1000 bytes
INVALID_SIGNATURE = 206
SALT_TOO_BIG = 207  # salt longer than 64 bytes
CAS_MISMATCH = 301
SEQ_TOO_LOW = 302  # sequence number less than current

ID_LEN = 20
NODE_LEN = 26  # compact node info: id, IPv4, port
PEER_LEN = 6  # compact peer info: IPv4, port
MAX_TID_LEN = 16  # we echo peers' transaction ids; long ones are refused

Addr = tuple[str, int]


class KrpcError(Exception):
    """A KRPC error: `code` is the BEP number sent back, `msg` its text."""

    def __init__(self, code: int, msg: str, tid: bytes | None = None) -> None:
        super().__init__("%d %s" % (code, msg))
        self.code = code
        self.msg = msg
        self.tid = tid


class Message:
    """One parsed KRPC message. `kind` is b"q", b"r" or b"e"."""

    __slots__ = ("kind", "tid", "method", "args", "body", "topic", "raw", "ip", "version")

    def __init__(self, kind: bytes, tid: bytes, method: bytes, args: dict[bytes, Any],
                 body: dict[bytes, Any], topic: bytes | None,
                 ip: bytes | None = None, version: bytes | None = None) -> None:
        self.kind = kind
        self.tid = tid
        self.method = method  # the query name (b"" for responses and errors)
        self.args = args  # "a" of a query, "r" of a response, {} for an error
        self.body = body  # the whole top-level dict
        self.topic = topic  # BEP 50 `c`: the topic's target, or None on the main DHT
        self.raw = b""
        self.ip = ip
        self.version = version

    @property
    def sender_id(self) -> bytes | None:
        nid = self.args.get(b"id")
        return nid if isinstance(nid, bytes) and len(nid) == ID_LEN else None

    def error(self) -> tuple[int, str]:
        """(code, message) of an error message; (201, ...) when it is malformed."""
        e = self.body.get(b"e")
        if isinstance(e, list) and len(e) == 2 and isinstance(e[0], int):
            m = e[1]
            return e[0], m.decode(errors="replace") if isinstance(m, bytes) else ""
        return GENERIC_ERROR, "malformed error"


def parse(data: bytes) -> Message:
    """Parse one datagram. Raises KrpcError(203, ...) for anything malformed; `tid` is set
    on the error when the transaction id could be read, so it can be answered."""
    try:
        body = bencode.decode(data)
    except bencode.BencodeError as e:
        raise KrpcError(PROTOCOL_ERROR, "malformed bencode: %s" % e) from None
    if not isinstance(body, dict):
        raise KrpcError(PROTOCOL_ERROR, "message is not a dict")
    tid = body.get(b"t")
    if not isinstance(tid, bytes) or len(tid) > MAX_TID_LEN:
        raise KrpcError(PROTOCOL_ERROR, "missing or bad transaction id")
    kind = body.get(b"y")
    topic = body.get(b"c")
    if topic is not None and (not isinstance(topic, bytes) or len(topic) != ID_LEN):
        raise KrpcError(PROTOCOL_ERROR, "c must be a 20-byte string", tid)
    ip = body.get(b"ip")
    version = body.get(b"v")
    msg_ip = ip if isinstance(ip, bytes) else None
    msg_v = version if isinstance(version, bytes) else None
    if kind == b"q":
        method = body.get(b"q")
        args = body.get(b"a")
        if not isinstance(method, bytes) or not isinstance(args, dict):
            raise KrpcError(PROTOCOL_ERROR, "query without q or a", tid)
        m = Message(kind, tid, method, args, body, topic, msg_ip, msg_v)
        if m.sender_id is None:
            raise KrpcError(PROTOCOL_ERROR, "query without a 20-byte id", tid)
    elif kind == b"r":
        r = body.get(b"r")
        if not isinstance(r, dict):
            raise KrpcError(PROTOCOL_ERROR, "response without r", tid)
        m = Message(kind, tid, b"", r, body, topic, msg_ip, msg_v)
    elif kind == b"e":
        m = Message(kind, tid, b"", {}, body, topic, msg_ip, msg_v)
    else:
        raise KrpcError(PROTOCOL_ERROR, "y must be q, r or e", tid)
    m.raw = data
    return m


def _envelope(tid: bytes, kind: bytes, topic: bytes | None, version: bytes | None,
              ip: Addr | None) -> dict[bytes, Any]:
    d: dict[bytes, Any] = {b"t": tid, b"y": kind}
    if topic is not None:
        d[b"c"] = topic
    if version is not None:
        d[b"v"] = version
    if ip is not None:
        d[b"ip"] = compact_peer(ip)
    return d


def encode_query(tid: bytes, method: bytes, args: dict[bytes, Any], *,
                 topic: bytes | None = None, version: bytes | None = None) -> bytes:
    d = _envelope(tid, b"q", topic, version, None)
    d[b"q"] = method
    d[b"a"] = args
    return bencode.encode(d)


def encode_response(tid: bytes, values: dict[bytes, Any], *, topic: bytes | None = None,
                    version: bytes | None = None, ip: Addr | None = None) -> bytes:
    d = _envelope(tid, b"r", topic, version, ip)
    d[b"r"] = values
    return bencode.encode(d)


def encode_error(tid: bytes, code: int, msg: str, *, topic: bytes | None = None,
                 version: bytes | None = None) -> bytes:
    d = _envelope(tid, b"e", topic, version, None)
    d[b"e"] = [code, msg.encode()]
    return bencode.encode(d)


# ---- compact formats -----------------------------------------------------------------

def compact_peer(addr: Addr) -> bytes:
    """IPv4 address and port as 6 bytes (BEP 5 compact peer info)."""
    return ipaddress.IPv4Address(addr[0]).packed + addr[1].to_bytes(2, "big")


def parse_peer(b: bytes) -> Addr:
    if len(b) != PEER_LEN:
        raise KrpcError(PROTOCOL_ERROR, "compact peer info must be 6 bytes")
    return str(ipaddress.IPv4Address(b[:4])), int.from_bytes(b[4:], "big")


def compact_nodes(nodes: Iterable[tuple[bytes, Addr]]) -> bytes:
    out = bytearray()
    for nid, addr in nodes:
        out += nid + compact_peer(addr)
    return bytes(out)


def parse_nodes(b: Any) -> list[tuple[bytes, Addr]]:
    """The `nodes` string of a response: (id, (ip, port)) per 26 bytes; port 0 skipped."""
    if not isinstance(b, bytes) or len(b) % NODE_LEN:
        raise KrpcError(PROTOCOL_ERROR, "nodes must be a multiple of 26 bytes")
    out: list[tuple[bytes, Addr]] = []
    for i in range(0, len(b), NODE_LEN):
        nid = b[i:i + ID_LEN]
        ip, port = parse_peer(b[i + ID_LEN:i + NODE_LEN])
        if port:
            out.append((nid, (ip, port)))
    return out


# ---- transactions --------------------------------------------------------------------

class Transactions:
    """Outstanding queries: futures keyed by (topic, transaction id), at most `limit`.

    BEP 50 asks for transaction state per topic; keying by topic gives that with one table.
    """

    def __init__(self, limit: int = 2048) -> None:
        self.limit = limit
        self._pending: dict[tuple[bytes, bytes], tuple[Addr, asyncio.Future[Message]]] = {}
        self._next = int.from_bytes(os.urandom(2), "big")
        self.counters = {"sent": 0, "answered": 0, "unmatched": 0, "full": 0, "timeouts": 0}

    def __len__(self) -> int:
        return len(self._pending)

    def open(self, addr: Addr, topic: bytes | None) -> tuple[bytes, asyncio.Future[Message]]:
        """A fresh 2-byte transaction id and the future its answer will resolve.

        Raises KrpcError(202) when the table is full: the caller sends nothing.
        """
        if len(self._pending) >= self.limit:
            self.counters["full"] += 1
            raise KrpcError(SERVER_ERROR, "too many outstanding queries")
        key_topic = topic or b""
        for _ in range(8):
            self._next = (self._next + 1) & 0xFFFF
            tid = self._next.to_bytes(2, "big")
            if (key_topic, tid) not in self._pending:
                break
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[(key_topic, tid)] = (addr, fut)
        self.counters["sent"] += 1
        return tid, fut

    def close(self, tid: bytes, topic: bytes | None) -> None:
        self._pending.pop((topic or b"", tid), None)

    def resolve(self, msg: Message, addr: Addr) -> bool:
        """Hand a response or error to its waiting query; False if nobody asked (from there)."""
        key = (msg.topic or b"", msg.tid)
        entry = self._pending.get(key)
        # an answer must come from the address asked: a spoofer cannot complete our queries
        if entry is None or entry[0] != addr:
            self.counters["unmatched"] += 1
            return False
        del self._pending[key]
        if not entry[1].done():
            entry[1].set_result(msg)
        self.counters["answered"] += 1
        return True

    def cancel_all(self) -> None:
        for _, fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self._pending.clear()
