"""GossipSub messages as subscribers and validators see them: the message, its id, the
StrictSign signature check, and the validation results (accept, reject, ignore,
throttle: the strictest wins)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pubmote.p2p.errors import ProtocolError
from pubmote.p2p.identity import PeerId, PublicKey
from pubmote.p2p.pubsub.rpc import Message

ACCEPT = "accept"
REJECT = "reject"
IGNORE = "ignore"
THROTTLE = "throttle"
RANK = {ACCEPT: 0, IGNORE: 1, THROTTLE: 2, REJECT: 3}   # the strictest result wins

Handler = Callable[["GossipMessage"], Awaitable[None] | None]
Validator = Callable[["GossipMessage"], str | Awaitable[str]]
MsgIdFn = Callable[["GossipMessage"], bytes]


class GossipMessage:
    """A message as subscribers and validators see it."""

    __slots__ = ("topic", "data", "from_peer", "seqno", "msg_id", "received_from",
                 "signature", "key")

    def __init__(self, topic: str, data: bytes, from_peer: PeerId, seqno: bytes,
                 msg_id: bytes = b"", received_from: PeerId | None = None,
                 signature: bytes | None = None, key: bytes | None = None) -> None:
        self.topic = topic
        self.data = data
        self.from_peer = from_peer
        self.seqno = seqno
        self.msg_id = msg_id
        self.received_from = received_from   # None for a message we published
        self.signature = signature
        self.key = key

    def __repr__(self) -> str:
        return "GossipMessage(%r, %d bytes, from %s)" % (self.topic, len(self.data),
                                                         self.from_peer)


def default_msg_id(msg: GossipMessage) -> bytes:
    """from + seqno, as go-libp2p and js-libp2p compute it (raw bytes)."""
    return msg.from_peer.raw + msg.seqno


def verify_signature(msg: Message, origin: PeerId) -> bool:
    """StrictSign: a signature by `origin`'s key (the key field, or the key inlined in
    the PeerId) over "libp2p-pubsub:" + the message without signature and key."""
    if msg.signature is None:
        return False
    try:
        if msg.key is not None:
            key = PublicKey.decode(msg.key)
            if not origin.matches(key):
                return False
        else:
            inline = origin.inline_key()
            if inline is None:
                return False
            key = inline
        return key.verify(msg.signature, msg.signed_payload())
    except ProtocolError:
        return False
