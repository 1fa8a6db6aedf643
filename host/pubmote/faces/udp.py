"""Boards over UDP (WiFi boards on the bridge's --udp face): one face per board address,
bounded in number."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any, cast

from pubmote.faces.board import BoardFace, FaceHandler, PacketHandler

log = logging.getLogger("pubmote.faces")


class DatagramFace(BoardFace):
    """One board behind the --udp face, known by its address: a datagram is one frame."""

    kind = "udp"

    def __init__(self, transport: asyncio.DatagramTransport, addr: Any,
                 on_packet: PacketHandler, on_state: FaceHandler) -> None:
        super().__init__("udp:%s:%s" % (addr[0], addr[1]), on_packet, on_state)
        self._transport = transport
        self.addr = addr
        self.counters["opens"] += 1
        self.up = True

    def _write_raw(self, frame: bytes) -> bool:
        try:
            self._transport.sendto(frame, self.addr)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.ENOBUFS):
                return False
            raise
        return True


class UdpServer(asyncio.DatagramProtocol):
    """The --udp listener: creates a DatagramFace per board address (bounded count)."""

    def __init__(self, on_packet: PacketHandler, on_state: FaceHandler,
                 max_boards: int = 256) -> None:
        self.on_packet = on_packet
        self.on_state = on_state
        self.max_boards = max_boards
        self.faces: dict[Any, DatagramFace] = {}
        self.refused = 0
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # CPython's selector datagram transport does not subclass DatagramTransport
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        face = self.faces.get(addr)
        if face is None:
            if len(self.faces) >= self.max_boards or self._transport is None:
                self.refused += 1
                return
            face = DatagramFace(self._transport, addr, self.on_packet, self.on_state)
            self.faces[addr] = face
            try:
                self.on_state(face)
            except Exception:  # noqa: BLE001 - a datagram must not end the listener's loop
                face.counters["rx_errors"] += 1
                log.exception("%s: face set-up failed", face.label)
                return
        face.feed(data)  # contained and counted by the face
