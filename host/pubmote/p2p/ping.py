"""Ping (/ipfs/ping/1.0.0): 32 random bytes, echoed back; the round trip is the latency."""

from __future__ import annotations

import asyncio
import os
import time

from pubmote.p2p.errors import ProtocolError
from pubmote.p2p.yamux import Stream

PROTOCOL_ID = "/ipfs/ping/1.0.0"
PING_SIZE = 32


async def handle_ping(stream: Stream) -> None:
    """Echo 32-byte pings until the remote closes its side."""
    while True:
        try:
            data = await stream.readexactly(PING_SIZE)
        except asyncio.IncompleteReadError:
            break
        await stream.write(data)
    await stream.close()


async def ping_rounds(stream: Stream, count: int) -> list[float]:
    """Send `count` pings one after the other; return each round trip in seconds."""
    rtts = []
    for _ in range(count):
        payload = os.urandom(PING_SIZE)
        t0 = time.perf_counter()
        await stream.write(payload)
        echo = await stream.readexactly(PING_SIZE)
        rtts.append(time.perf_counter() - t0)
        if echo != payload:
            raise ProtocolError("ping: the echo differs from what we sent")
    return rtts
