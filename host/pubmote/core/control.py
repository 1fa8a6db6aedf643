"""The board<->bridge control protocol, the bridge's side: the names boards register and
hear hellos on, and the packets the hub answers notifies with (the ack Data). The same
names are spelt in firmware/pubmote_node/node.py (one shared module is left to do, see
docs/architecture.md)."""

from __future__ import annotations

import os

from pubmote_wire import name as ndn_name
from pubmote_wire import notify
from pubmote_wire.signature import DigestSigner

REGISTER = ndn_name.from_uri("/pubmote/ctl/register")
HELLO = ndn_name.from_uri("/pubmote/ctl/hello")
MSG = ndn_name.generic(b"msg")
NOTIFY_COMPONENT = ndn_name.generic(b"notify")
SIGNER = DigestSigner()
# room for everything but the names and payload in a notify/msg packet: TLV headers,
# notify and msg components, params digest, nonces, lifetime, signature info and value
OVERHEAD = 256


def notify_topic(prefix: bytes) -> bytes | None:
    """The topic of a registered `/<topic>/notify` prefix, or None."""
    comps = ndn_name.components(prefix)
    if len(comps) >= 2 and bytes(comps[-1]) == NOTIFY_COMPONENT:
        return prefix[: len(prefix) - len(NOTIFY_COMPONENT)]
    return None


def encode_ack(notify_name: bytes) -> bytearray:
    buf = bytearray(len(notify_name) + OVERHEAD)
    n = notify.encode_ack_data(buf, 0, notify_name, signer=SIGNER)
    return buf[:n]


def new_nonce() -> int:
    return int.from_bytes(os.urandom(4), "big")
