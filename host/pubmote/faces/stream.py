"""A board on a TCP connection (a WiFi board dialling the bridge's --tcp face)."""

from __future__ import annotations

import asyncio
import logging

from pubmote.faces.board import OUT_LIMIT_BYTES, BoardFace, FaceHandler, PacketHandler

log = logging.getLogger("pubmote.faces")


class StreamFace(BoardFace, asyncio.Protocol):
    """A board connected over TCP to the bridge's --tcp face: one face per connection."""

    kind = "tcp"

    def __init__(self, on_packet: PacketHandler, on_state: FaceHandler) -> None:
        super().__init__("tcp:?", on_packet, on_state)
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.label = "tcp:%s:%s" % (peer[0], peer[1]) if peer else "tcp:?"
        transport.set_write_buffer_limits(high=OUT_LIMIT_BYTES)
        self.counters["opens"] += 1
        self._set_up(True)

    def data_received(self, data: bytes) -> None:
        if not self.feed(data) and self._transport is not None:
            self._transport.close()  # counted in rx_errors; the board dials again

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._set_up(False)

    def _write_raw(self, frame: bytes) -> bool:
        t = self._transport
        if t is None or t.get_write_buffer_size() + len(frame) > OUT_LIMIT_BYTES:
            return False
        t.write(frame)
        return True

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        super().close()
