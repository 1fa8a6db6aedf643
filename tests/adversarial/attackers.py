"""What the resource-limit tests attack with and what they check: hostile peers on
loopback (connections from other loopback addresses than 127.0.0.1, so that a per-address
cap tells them from the genuine peers; fake boards speaking the board link), and a
genuine simulated board served through it all: its readings reach an SP subscriber and a
command published to it through SP reaches it (its echo comes back)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import tracemalloc
from typing import Any

from e2e import Collector, Publisher
from pubmote.core import nfd_mgmt
from pubmote_wire import cbor, control, framing, interest, name, sp, tlv

# the attackers' own addresses: all of 127.0.0.0/8 is loopback on Linux
ATTACKERS = ["127.0.0.%d" % i for i in range(2, 12)]


class Genuine:
    """The genuine board `board` (the demo app) as an SP user sees it."""

    def __init__(self, bridge: Any, board: str = "sim1") -> None:
        self.base = b"/pubmote/demo/%s/" % board.encode()
        self.col = Collector(bridge.cfg["sp_pub"][0], self.base)
        self.pub = Publisher(bridge.cfg["sp_sub"][0])
        self.commands = 0

    async def served(self, timeout_s: float = 10.0) -> float:
        """Wait until a new reading arrives and a new command's echo comes back; return
        the seconds it took (AssertionError after timeout_s). SP PUB/SUB keeps nothing for
        a subscriber that is not there yet, so the command is sent again each second."""
        t0 = time.monotonic()
        readings = len(self.col.with_prefix(self.base + b"temperature|"))
        self.commands += 1
        cmd = b"check-%d" % self.commands
        ack = self.base + b"ack|" + cmd
        sent_at = -1.0
        while True:
            now = time.monotonic()
            got = len(self.col.with_prefix(self.base + b"temperature|")) > readings
            if got and ack in self.col.lines:
                return now - t0
            if now - t0 > timeout_s:
                raise AssertionError("genuine board not served within %.0f s (reading: %s, "
                                     "command echo: %s)" % (timeout_s, got,
                                                            ack in self.col.lines))
            if now - sent_at >= 1.0:
                await self.pub.send(self.base + b"command|" + cmd)
                sent_at = now
            await asyncio.sleep(0.05)

    async def recovered(self, what: str, within_s: float = 10.0) -> float:
        """Served again within within_s of the attackers leaving: the seconds it took."""
        took = await self.served(within_s)
        print("%s: genuine board served again %.1f s after the attackers left" % (what, took))
        return took

    def close(self) -> None:
        self.col.close()
        self.pub.close()


class Peer(asyncio.Protocol):
    """One hostile connection: writes what it is told, reads and keeps nothing."""

    def __init__(self) -> None:
        self.t: asyncio.Transport | None = None
        self.closed = False  # by the other side (closed or reset)
        self.received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def data_received(self, data: bytes) -> None:
        self.received += len(data)

    def eof_received(self) -> bool:
        self.closed = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        if self.t is not None and not self.closed:
            self.t.write(data)


async def open_conns(port: int, sources: list[str], per_source: int,
                     first: bytes = b"") -> list[Peer]:
    """per_source TCP connections from each address in `sources` to 127.0.0.1:port,
    writing `first` on each; those that fail to open are left out."""
    loop = asyncio.get_running_loop()
    out = []
    for src in sources:
        for _ in range(per_source):
            try:
                _, peer = await asyncio.wait_for(loop.create_connection(
                    Peer, "127.0.0.1", port, local_addr=(src, 0)), 5)
            except (OSError, TimeoutError):
                continue
            if first:
                peer.write(first)
            out.append(peer)
    return out


def alive(peers: list[Peer]) -> int:
    """How many of these connections the other side has neither closed nor reset."""
    return sum(1 for p in peers if not p.closed)


def close_all(peers: list[Peer]) -> None:
    for p in peers:
        if p.t is not None:
            p.t.abort()


def registration(board: str, serves: int = 0) -> bytes:
    """A board's registration Interest, framed for a board link (TCP, UDP)."""
    params = cbor.dumps({"name": board, "prefix": "/pubmote/node/" + board, "filters": [],
                         "serve": ["/pubmote/serve/%s/%d" % (board, i) for i in range(serves)]})
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, board.encode(), params, -1, 1500, None, None, None)
    return bytes(framing.encode(bytes(buf[:n])))


def _tlv(typ: int, value: bytes) -> bytes:
    buf = bytearray(tlv.tl_size(typ, len(value)))
    tlv.write_tlv(buf, 0, typ, value)
    return bytes(buf)


def rib_register(prefix: str) -> bytes:
    """NFD's rib/register command for `prefix` (what python-ndn's register sends), for
    the NDN face."""
    params = _tlv(nfd_mgmt.CONTROL_PARAMETERS, _tlv(0x07, name.from_uri(prefix)))
    return interest.encode(nfd_mgmt.RIB_REGISTER + name.generic(params),
                           nonce=int.from_bytes(os.urandom(4), "big"), lifetime_ms=4000)


def sp_raw(port: int, proto: int, source: str = "127.0.0.1") -> socket.socket:
    """A blocking SP client socket (PUB or SUB) that has sent its SP header."""
    s = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
    s.sendall(sp.header(proto))
    return s


class Memory:
    """The Python heap this process (bridge included) grew by since start(), through
    tracemalloc: what stays allocated, not what the allocator keeps cached."""

    def start(self) -> None:
        tracemalloc.start()
        self.base = tracemalloc.get_traced_memory()[0]

    def grown_kb(self) -> int:
        return (tracemalloc.get_traced_memory()[0] - self.base) // 1024

    def stop(self) -> None:
        tracemalloc.stop()
