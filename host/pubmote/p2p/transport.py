"""TCP transport: dial and listen on /ip4|/ip6/.../tcp/... multiaddrs with asyncio streams.

`RawConn` is the byte stream that multistream-select and Noise run over before the
connection is secured.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from pubmote.p2p.multiaddr import Multiaddr

# asyncio's StreamReader buffer limit: reads above it pause the socket (back-pressure).
_READ_LIMIT = 256 * 1024


class RawConn:
    """An unsecured TCP connection: exact reads, writes with back-pressure."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        sock = writer.get_extra_info("sockname")
        self.remote_addr = _sockaddr_to_multiaddr(peer)
        self.local_addr = _sockaddr_to_multiaddr(sock)
        s = writer.get_extra_info("socket")
        if s is not None:
            # Yamux frames are small and latency matters (ping, GossipSub control).
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def readexactly(self, n: int) -> bytes:
        return await self.reader.readexactly(n)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()

    def abort(self) -> None:
        """Drop the connection without flushing (a peer that broke the rules)."""
        t = self.writer.transport
        if t is not None and not t.is_closing():
            t.abort()

    async def wait_closed(self) -> None:
        try:
            await self.writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass


def _sockaddr_to_multiaddr(addr: object) -> Multiaddr | None:
    if not isinstance(addr, tuple) or len(addr) < 2:
        return None
    try:
        return Multiaddr.from_tcp(str(addr[0]), int(addr[1]))
    except ValueError:
        return None


async def dial_tcp(addr: Multiaddr) -> RawConn:
    """Open a TCP connection to `addr` (its /p2p part, if any, is ignored here)."""
    host, port = addr.tcp_host_port()
    reader, writer = await asyncio.open_connection(host, port, limit=_READ_LIMIT)
    return RawConn(reader, writer)


async def listen_tcp(addr: Multiaddr,
                     on_conn: Callable[[RawConn], Awaitable[None]]) -> tuple[asyncio.Server,
                                                                               list[Multiaddr]]:
    """Listen on `addr` (port 0 picks one); return the server and the bound addresses."""
    host, port = addr.tcp_host_port()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await on_conn(RawConn(reader, writer))

    server = await asyncio.start_server(accepted, host, port, limit=_READ_LIMIT,
                                        reuse_address=True)
    bound = []
    for s in server.sockets:
        ma = _sockaddr_to_multiaddr(s.getsockname())
        if ma is not None:
            bound.append(ma)
    return server, bound
