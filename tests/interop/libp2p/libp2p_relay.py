"""A loopback TCP relay for the interop tests: forwards bytes both ways and calls a hook
after each forwarded chunk, so a test can kill a real peer at a chosen point (mid-handshake)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Relay:
    """Listen on 127.0.0.1 and relay every connection to (host, port)."""

    def __init__(self, host: str, port: int,
                 on_chunk: Callable[[str, int], None] | None = None) -> None:
        self.target = (host, port)
        self.on_chunk = on_chunk            # (direction "up"|"down", total bytes that way)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> Relay:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, way: str) -> None:
        total = 0
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                w.write(data)
                await w.drain()
                total += len(data)
                if self.on_chunk is not None:
                    self.on_chunk(way, total)
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                w.close()

    async def _accepted(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            sr, sw = await asyncio.open_connection(*self.target)
        except OSError:
            cw.close()
            return
        self._writers += [cw, sw]
        await asyncio.gather(self._pump(cr, sw, "up"), self._pump(sr, cw, "down"))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            with contextlib.suppress(Exception):
                w.close()
