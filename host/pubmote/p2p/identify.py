"""Identify (/ipfs/id/1.0.0): tell a peer our key, protocols and listen addresses; learn
theirs. js-libp2p's pubsub starts talking to a peer only after identify told it that the
peer speaks the pubsub protocol.
"""

from __future__ import annotations

import logging

from pubmote.p2p.codec import (
    decode_uvarint,
    encode_uvarint,
    pb_bytes,
    pb_decode,
    pb_fields,
    pb_get_bytes,
    pb_get_list,
)
from pubmote.p2p.errors import ProtocolError
from pubmote.p2p.identity import PublicKey
from pubmote.p2p.multiaddr import Multiaddr

log = logging.getLogger(__name__)

PROTOCOL_ID = "/ipfs/id/1.0.0"
PUSH_PROTOCOL_ID = "/ipfs/id/push/1.0.0"
PROTOCOL_VERSION = "ipfs/0.1.0"
MAX_MESSAGE = 64 * 1024  # js-libp2p's own limit is lower; far above any honest message
_MAX_ITEMS = 256


class IdentifyInfo:
    """What a peer told us about itself."""

    def __init__(self, *, public_key: PublicKey | None = None,
                 listen_addrs: list[Multiaddr] | None = None, protocols: list[str] | None = None,
                 observed_addr: Multiaddr | None = None, protocol_version: str = "",
                 agent_version: str = "", signed_peer_record: bytes = b"") -> None:
        self.public_key = public_key
        self.listen_addrs = listen_addrs or []
        self.protocols = protocols or []
        self.observed_addr = observed_addr
        self.protocol_version = protocol_version
        self.agent_version = agent_version
        self.signed_peer_record = signed_peer_record

    def encode(self) -> bytes:
        """The Identify protobuf (fields 1-6; no signed peer record)."""
        out = bytearray()
        out += pb_bytes(5, self.protocol_version)
        out += pb_bytes(6, self.agent_version)
        if self.public_key is not None:
            out += pb_bytes(1, self.public_key.encode())
        for a in self.listen_addrs:
            out += pb_bytes(2, a.to_bytes())
        if self.observed_addr is not None:
            out += pb_bytes(4, self.observed_addr.to_bytes())
        for p in self.protocols:
            out += pb_bytes(3, p)
        return bytes(out)

    @classmethod
    def decode(cls, buf: bytes) -> IdentifyInfo:
        """Parse; addresses we cannot decode are skipped (and logged), not fatal."""
        msg = pb_decode(buf, repeated=frozenset((2, 3)))
        key_bytes = pb_get_bytes(msg, 1)
        addrs_raw = pb_get_list(msg, 2)
        protos_raw = pb_get_list(msg, 3)
        if len(addrs_raw) > _MAX_ITEMS or len(protos_raw) > _MAX_ITEMS:
            raise ProtocolError("identify: too many addresses or protocols")
        addrs = []
        for raw in addrs_raw:
            try:
                addrs.append(Multiaddr.from_bytes(raw))
            except (ProtocolError, ValueError) as e:
                log.debug("identify: skipping an address we cannot decode: %s", e)
        observed = None
        obs_raw = pb_get_bytes(msg, 4)
        if obs_raw:
            try:
                observed = Multiaddr.from_bytes(obs_raw)
            except (ProtocolError, ValueError):
                observed = None
        try:
            protocols = [p.decode() for p in protos_raw]
            pv = (pb_get_bytes(msg, 5) or b"").decode()
            av = (pb_get_bytes(msg, 6) or b"").decode()
        except UnicodeDecodeError:
            raise ProtocolError("identify: text field is not UTF-8") from None
        return cls(public_key=PublicKey.decode(key_bytes) if key_bytes else None,
                   listen_addrs=addrs, protocols=protocols, observed_addr=observed,
                   protocol_version=pv, agent_version=av,
                   signed_peer_record=pb_get_bytes(msg, 8) or b"")


def merge(old: IdentifyInfo | None, push: IdentifyInfo, raw: bytes) -> IdentifyInfo:
    """Apply an identify push: the fields it carries replace ours, the others stay."""
    if old is None:
        return push
    present = {f for f, _wt, _v in pb_fields(raw)}
    return IdentifyInfo(
        public_key=push.public_key if 1 in present else old.public_key,
        listen_addrs=push.listen_addrs if 2 in present else old.listen_addrs,
        protocols=push.protocols if 3 in present else old.protocols,
        observed_addr=push.observed_addr if 4 in present else old.observed_addr,
        protocol_version=push.protocol_version if 5 in present else old.protocol_version,
        agent_version=push.agent_version if 6 in present else old.agent_version,
        signed_peer_record=push.signed_peer_record if 8 in present else old.signed_peer_record)


def body_of(data: bytes) -> bytes:
    """The protobuf inside what the remote sent (length-prefixed or bare)."""
    try:
        n, pos = decode_uvarint(data)
        if n == len(data) - pos:
            return data[pos:]
    except ProtocolError:
        pass
    return data


def frame(info: IdentifyInfo) -> bytes:
    """The message as js-libp2p, go-libp2p and py-libp2p send it: varint length first."""
    body = info.encode()
    return encode_uvarint(len(body)) + body


def unframe(data: bytes) -> IdentifyInfo:
    """Parse what the remote sent before closing: length-prefixed (everyone today) or a
    bare protobuf (old implementations)."""
    return IdentifyInfo.decode(body_of(data))
