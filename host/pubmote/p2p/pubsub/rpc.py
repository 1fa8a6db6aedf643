"""The libp2p pubsub RPC protobuf (floodsub/gossipsub, libp2p/specs pubsub/README.md):
RPC{subscriptions=1, publish=2, control=3}, bounded decoding, canonical encoding.

Messages keep the exact bytes they arrived in (`Message.raw`), so a relayed message is
forwarded byte for byte and its signature is checked over what the publisher signed.
Every list is bounded; anything malformed is a ProtocolError.
"""

from __future__ import annotations

from pubmote.p2p.codec import WT_LEN, WT_VARINT, decode_uvarint, encode_uvarint, pb_bytes, pb_varint
from pubmote.p2p.errors import ProtocolError

MAX_RPC_SIZE = 1 << 20          # default max_transmit_size
MAX_SUBSCRIPTIONS = 1024        # SubOpts per RPC
MAX_MESSAGES = 4096             # messages per RPC
MAX_CONTROL_ITEMS = 1024        # ihave/iwant/graft/prune/idontwant entries per RPC
MAX_IDS = 5000                  # message ids per IHAVE/IWANT/IDONTWANT (go's MaxIHaveLength)
MAX_PX_PEERS = 64               # PeerInfo entries per PRUNE
MAX_TOPIC_BYTES = 1024
MAX_ID_BYTES = 512

SIGN_PREFIX = b"libp2p-pubsub:"


class _Reader:
    """Walks the fields of one protobuf message: (field, wire type, value, start, end)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)

    def next(self) -> tuple[int, int, int | bytes, int]:
        """The next field as (field, wire type, value, start offset of its key)."""
        start = self.pos
        key, pos = decode_uvarint(self.buf, start)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise ProtocolError("protobuf field number 0")
        if wt == WT_VARINT:
            v, pos = decode_uvarint(self.buf, pos)
            self.pos = pos
            return field, wt, v, start
        if wt == WT_LEN:
            n, pos = decode_uvarint(self.buf, pos)
            if n > self.end - pos:
                raise ProtocolError("protobuf length %d beyond input" % n)
            self.pos = pos + n
            return field, wt, self.buf[pos:pos + n], start
        if wt == 1 or wt == 5:  # fixed64/fixed32: skipped, as unknown fields are
            n = 8 if wt == 1 else 4
            if n > self.end - pos:
                raise ProtocolError("truncated fixed field")
            self.pos = pos + n
            return field, wt, 0, start
        raise ProtocolError("unsupported protobuf wire type %d" % wt)


def _want_bytes(field: int, wt: int, v: int | bytes) -> bytes:
    if wt != WT_LEN or not isinstance(v, bytes):
        raise ProtocolError("pubsub field %d: expected bytes" % field)
    return v


def _want_int(field: int, wt: int, v: int | bytes) -> int:
    if wt != WT_VARINT or not isinstance(v, int):
        raise ProtocolError("pubsub field %d: expected varint" % field)
    return v


def _topic(b: bytes) -> str:
    if len(b) > MAX_TOPIC_BYTES:
        raise ProtocolError("topic of %d bytes" % len(b))
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("topic is not UTF-8") from None


def _msg_id(b: bytes) -> bytes:
    if len(b) > MAX_ID_BYTES:
        raise ProtocolError("message id of %d bytes" % len(b))
    return b


class Message:
    """A pubsub Message. `raw` is its encoding (as received, or as we built it)."""

    __slots__ = ("from_", "data", "seqno", "topic", "signature", "key", "raw", "_signed_start")

    def __init__(self, *, from_: bytes | None = None, data: bytes = b"",
                 seqno: bytes | None = None, topic: str = "", signature: bytes | None = None,
                 key: bytes | None = None, raw: bytes | None = None) -> None:
        self.from_ = from_
        self.data = data
        self.seqno = seqno
        self.topic = topic
        self.signature = signature
        self.key = key
        self.raw = raw if raw is not None else self.encode()

    def unsigned_bytes(self) -> bytes:
        """The canonical encoding without signature and key: what StrictSign signs."""
        out = b""
        if self.from_ is not None:
            out += pb_bytes(1, self.from_)
        out += pb_bytes(2, self.data)
        if self.seqno is not None:
            out += pb_bytes(3, self.seqno)
        out += pb_bytes(4, self.topic)
        return out

    def encode(self) -> bytes:
        out = self.unsigned_bytes()
        if self.signature is not None:
            out += pb_bytes(5, self.signature)
        if self.key is not None:
            out += pb_bytes(6, self.key)
        return out

    def signed_payload(self) -> bytes:
        """"libp2p-pubsub:" + the received encoding with the signature and key fields cut
        out, so the check covers exactly what the publisher marshalled."""
        r = _Reader(self.raw)
        parts: list[bytes] = [SIGN_PREFIX]
        while r.pos < r.end:
            field, _wt, _v, start = r.next()
            if field != 5 and field != 6:
                parts.append(self.raw[start:r.pos])
        return b"".join(parts)

    @classmethod
    def decode(cls, buf: bytes) -> Message:
        # The hot path of a router (every copy of every message, duplicates included):
        # one-byte keys and lengths are read inline, anything else goes through _Reader.
        r = _Reader(buf)
        from_ = seqno = sig = key = None
        data = b""
        topics = 0
        topic = ""
        end = r.end
        while r.pos < end:
            pos = r.pos
            k = buf[pos]
            if (k & 7) == WT_LEN and 0x08 <= k < 0x80 and pos + 1 < end and buf[pos + 1] < 0x80:
                n = buf[pos + 1]
                start = pos + 2
                if n > end - start:
                    raise ProtocolError("protobuf length %d beyond input" % n)
                field, wt = k >> 3, WT_LEN
                v: int | bytes = buf[start:start + n]
                r.pos = start + n
            else:
                field, wt, v, _ = r.next()
            if field == 1:
                from_ = _want_bytes(field, wt, v)
            elif field == 2:
                data = _want_bytes(field, wt, v)
            elif field == 3:
                seqno = _want_bytes(field, wt, v)
            elif field == 4:
                topic = _topic(_want_bytes(field, wt, v))
                topics += 1
            elif field == 5:
                sig = _want_bytes(field, wt, v)
            elif field == 6:
                key = _want_bytes(field, wt, v)
        # Old floodsub allowed several topicIDs; a message in one mesh has exactly one.
        if topics != 1:
            raise ProtocolError("message with %d topics" % topics)
        return cls(from_=from_, data=data, seqno=seqno, topic=topic, signature=sig, key=key,
                   raw=buf)

    def __repr__(self) -> str:
        return "Message(topic=%r, %d bytes)" % (self.topic, len(self.data))


class PeerInfo:
    """PX record in a PRUNE: a PeerId and an optional signed peer record."""

    __slots__ = ("peer_id", "signed_record")

    def __init__(self, peer_id: bytes | None = None, signed_record: bytes | None = None) -> None:
        self.peer_id = peer_id
        self.signed_record = signed_record

    def encode(self) -> bytes:
        out = b""
        if self.peer_id is not None:
            out += pb_bytes(1, self.peer_id)
        if self.signed_record is not None:
            out += pb_bytes(2, self.signed_record)
        return out


class Prune:
    __slots__ = ("topic", "peers", "backoff_s")

    def __init__(self, topic: str, peers: list[PeerInfo] | None = None,
                 backoff_s: int | None = None) -> None:
        self.topic = topic
        self.peers = peers or []
        self.backoff_s = backoff_s

    def encode(self) -> bytes:
        out = pb_bytes(1, self.topic)
        for p in self.peers:
            out += pb_bytes(2, p.encode())
        if self.backoff_s is not None:
            out += pb_varint(3, self.backoff_s)
        return out


class Control:
    """ControlMessage: ihave [(topic, ids)], iwant [ids], graft [topic], prune, idontwant."""

    __slots__ = ("ihave", "iwant", "graft", "prune", "idontwant")

    def __init__(self) -> None:
        self.ihave: list[tuple[str, list[bytes]]] = []
        self.iwant: list[list[bytes]] = []
        self.graft: list[str] = []
        self.prune: list[Prune] = []
        self.idontwant: list[list[bytes]] = []

    def empty(self) -> bool:
        return not (self.ihave or self.iwant or self.graft or self.prune or self.idontwant)

    def encode(self) -> bytes:
        parts: list[bytes] = []
        for topic, ids in self.ihave:
            parts.append(pb_bytes(1, pb_bytes(1, topic) + b"".join(pb_bytes(2, i) for i in ids)))
        for ids in self.iwant:
            parts.append(pb_bytes(2, b"".join(pb_bytes(1, i) for i in ids)))
        for topic in self.graft:
            parts.append(pb_bytes(3, pb_bytes(1, topic)))
        for pr in self.prune:
            parts.append(pb_bytes(4, pr.encode()))
        for ids in self.idontwant:
            parts.append(pb_bytes(5, b"".join(pb_bytes(1, i) for i in ids)))
        return b"".join(parts)

    @classmethod
    def decode(cls, buf: bytes) -> Control:
        c = cls()
        r = _Reader(buf)
        items = 0
        while r.pos < r.end:
            field, wt, v, _ = r.next()
            if field not in (1, 2, 3, 4, 5):
                continue
            items += 1
            if items > MAX_CONTROL_ITEMS:
                raise ProtocolError("more than %d control entries" % MAX_CONTROL_ITEMS)
            body = _want_bytes(field, wt, v)
            if field == 1:
                topic, ids = _topic_and_ids(body, 1, 2)
                c.ihave.append((topic, ids))
            elif field == 2:
                c.iwant.append(_topic_and_ids(body, 0, 1)[1])
            elif field == 3:
                c.graft.append(_topic_and_ids(body, 1, 0)[0])
            elif field == 4:
                c.prune.append(_decode_prune(body))
            else:
                c.idontwant.append(_topic_and_ids(body, 0, 1)[1])
        return c


def _topic_and_ids(buf: bytes, topic_field: int, ids_field: int) -> tuple[str, list[bytes]]:
    r = _Reader(buf)
    topic = ""
    ids: list[bytes] = []
    while r.pos < r.end:
        field, wt, v, _ = r.next()
        if field == topic_field:
            topic = _topic(_want_bytes(field, wt, v))
        elif field == ids_field:
            if len(ids) >= MAX_IDS:
                raise ProtocolError("more than %d message ids" % MAX_IDS)
            ids.append(_msg_id(_want_bytes(field, wt, v)))
    return topic, ids


def _decode_prune(buf: bytes) -> Prune:
    r = _Reader(buf)
    pr = Prune("")
    while r.pos < r.end:
        field, wt, v, _ = r.next()
        if field == 1:
            pr.topic = _topic(_want_bytes(field, wt, v))
        elif field == 2:
            if len(pr.peers) >= MAX_PX_PEERS:
                raise ProtocolError("more than %d PX peers" % MAX_PX_PEERS)
            pi = PeerInfo()
            pr2 = _Reader(_want_bytes(field, wt, v))
            while pr2.pos < pr2.end:
                f2, wt2, v2, _ = pr2.next()
                if f2 == 1:
                    pi.peer_id = _want_bytes(f2, wt2, v2)
                elif f2 == 2:
                    pi.signed_record = _want_bytes(f2, wt2, v2)
            pr.peers.append(pi)
        elif field == 3:
            pr.backoff_s = _want_int(field, wt, v)
    return pr


class RPC:
    """One RPC frame: subscriptions [(subscribe, topic)], publish [Message], control."""

    __slots__ = ("subscriptions", "publish", "control")

    def __init__(self, subscriptions: list[tuple[bool, str]] | None = None,
                 publish: list[Message] | None = None, control: Control | None = None) -> None:
        self.subscriptions = subscriptions or []
        self.publish = publish or []
        self.control = control

    def encode(self) -> bytes:
        parts: list[bytes] = []
        for sub, topic in self.subscriptions:
            parts.append(pb_bytes(1, pb_varint(1, 1 if sub else 0) + pb_bytes(2, topic)))
        for m in self.publish:
            parts.append(pb_bytes(2, m.raw))
        if self.control is not None and not self.control.empty():
            parts.append(pb_bytes(3, self.control.encode()))
        return b"".join(parts)

    @classmethod
    def decode(cls, buf: bytes, *, max_size: int = MAX_RPC_SIZE) -> RPC:
        """Parse one RPC; ProtocolError when malformed or beyond the bounds above."""
        if len(buf) > max_size:
            raise ProtocolError("RPC of %d bytes exceeds %d" % (len(buf), max_size))
        rpc = cls()
        r = _Reader(bytes(buf))
        while r.pos < r.end:
            field, wt, v, _ = r.next()
            if field == 1:
                if len(rpc.subscriptions) >= MAX_SUBSCRIPTIONS:
                    raise ProtocolError("more than %d subscriptions" % MAX_SUBSCRIPTIONS)
                sub = False
                topic: str | None = None
                sr = _Reader(_want_bytes(field, wt, v))
                while sr.pos < sr.end:
                    f2, wt2, v2, _ = sr.next()
                    if f2 == 1:
                        sub = _want_int(f2, wt2, v2) != 0
                    elif f2 == 2:
                        topic = _topic(_want_bytes(f2, wt2, v2))
                if topic is None:
                    raise ProtocolError("subscription without a topic")
                rpc.subscriptions.append((sub, topic))
            elif field == 2:
                if len(rpc.publish) >= MAX_MESSAGES:
                    raise ProtocolError("more than %d messages" % MAX_MESSAGES)
                rpc.publish.append(Message.decode(_want_bytes(field, wt, v)))
            elif field == 3:
                ctl = Control.decode(_want_bytes(field, wt, v))
                if rpc.control is None:
                    rpc.control = ctl
                else:  # protobuf merges repeated occurrences of a sub-message
                    rpc.control.ihave += ctl.ihave
                    rpc.control.iwant += ctl.iwant
                    rpc.control.graft += ctl.graft
                    rpc.control.prune += ctl.prune
                    rpc.control.idontwant += ctl.idontwant
        return rpc


def frame(rpc_bytes: bytes) -> bytes:
    """The length-prefixed form on the stream."""
    return encode_uvarint(len(rpc_bytes)) + rpc_bytes
