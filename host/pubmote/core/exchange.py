"""The hub's own NDN packets out: an Interest sent with its Data awaited through the PIT,
and the Nacks and Data replies it answers with."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from pubmote.core.forwarder import Face, Forwarder
from pubmote.core.registry import HubFace
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import lp, notify

SIGNER = notify.DIGEST  # the hub's own packets carry DigestSha256 (the codec's one signer)
# room for everything but the names and payload in a notify/msg packet: TLV headers,
# notify and msg components, params digest, nonces, lifetime, signature info and value
OVERHEAD = 256


def new_nonce() -> int:
    """A random Interest nonce."""
    return int.from_bytes(os.urandom(4), "big")


class Exchange:
    """Interests the hub expresses itself, each answered by its Data or nothing."""

    def __init__(self, fwd: Forwarder, *, timeout_ms: int) -> None:
        self._fwd = fwd
        self.timeout_ms = timeout_ms

    async def express(self, pkt: bytes, hops: Sequence[Face], nacked: list[bool] | None = None,
                      owner: Face | None = None) -> bytes | None:
        """Send an Interest on behalf of `owner` (the face whose share of the PIT it counts
        in), wait for its Data (None on timeout, Nack or refusal; a Nack also appends True
        to `nacked`)."""
        i = ndn_interest.decode_interest(pkt)
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()

        def sink(reply: bytes | None, nack_reason: int | None) -> None:
            if not fut.done():
                if nack_reason is not None and nacked is not None:
                    nacked.append(True)
                fut.set_result(reply)

        if self._fwd.add_pending(bytes(i.name), i.nonce, self.timeout_ms, sink=sink,
                                 owner=owner):
            for h in hops:
                h.send_packet(pkt)
        return await fut


def reply(face: HubFace, nm: bytes, content: bytes) -> None:
    """Answer an Interest named nm with a Data of content, signed by the hub."""
    face.send_packet(ndn_data.encode(nm, content, freshness_ms=0, signer=SIGNER))


def send_nack(face: HubFace, pkt: bytes, counters: dict[str, int]) -> None:
    """Nack the Interest pkt (no route), counted in nacks_sent."""
    buf = bytearray(len(pkt) + 32)
    n = lp.encode_nack(buf, 0, pkt, lp.NACK_NO_ROUTE)
    face.send_packet(bytes(buf[:n]))
    counters["nacks_sent"] += 1
