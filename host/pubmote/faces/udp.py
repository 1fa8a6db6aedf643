"""Boards over UDP (WiFi boards on the bridge's --udp face): one face per board address,
within the listener's caps (udp_max_boards, udp_max_boards_per_ip); an address slot is
given back when its face idles or never registers a board (FaceWatch), so new boards
are answered again."""

from __future__ import annotations

import asyncio
import errno
import logging
from typing import Any, cast

from pubmote.core.admission import Admission, source_of
from pubmote.core.limits import LimitHits, Limits
from pubmote.faces.board import BoardFace, FaceHandler, PacketHandler
from pubmote.faces.watch import FaceWatch

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

    def _write_raw(self, frame: bytes) -> bool:
        try:
            self._transport.sendto(frame, self.addr)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.ENOBUFS):
                return False
            raise
        return True


class UdpServer(asyncio.DatagramProtocol):
    """The --udp listener: a DatagramFace per board address (bounded, freed on idle)."""

    def __init__(self, on_packet: PacketHandler, on_state: FaceHandler, *,
                 limits: Limits | None = None, hits: LimitHits | None = None) -> None:
        lim = limits if limits is not None else Limits()
        hits = hits if hits is not None else LimitHits()
        self.on_packet = on_packet
        self.on_state = on_state
        self.faces: dict[Any, DatagramFace] = {}
        self.admission = Admission("--udp", max_total=lim.udp_max_boards,
                                   max_per_ip=lim.udp_max_boards_per_ip, hits=hits,
                                   total_key="udp_max_boards",
                                   per_ip_key="udp_max_boards_per_ip")
        self.watch = FaceWatch(register_timeout_s=lim.board_register_timeout_s,
                               idle_timeout_s=lim.board_idle_timeout_s, hits=hits)
        self.refused = 0
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # CPython's selector datagram transport does not subclass DatagramTransport
        self._transport = cast(asyncio.DatagramTransport, transport)
        self.watch.start()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        asyncio.get_running_loop().create_task(self.watch.close())

    def datagram_received(self, data: bytes, addr: Any) -> None:
        face = self.faces.get(addr)
        if face is None:
            if self._transport is None or not self.admission.admit(source_of(addr)):
                self.refused += 1
                return
            face = DatagramFace(self._transport, addr, self.on_packet, self._state)
            self.faces[addr] = face
            self.watch.watch(face)
            try:
                face.set_up(True)
            except Exception:  # a datagram must not end the listener's loop
                face.counters["rx_errors"] += 1
                log.exception("%s: face set-up failed", face.label)
                return
        face.feed(data)  # contained and counted by the face

    def _state(self, face: BoardFace) -> None:
        if not face.up:
            assert isinstance(face, DatagramFace)
            if self.faces.get(face.addr) is face:
                del self.faces[face.addr]
                self.admission.release(source_of(face.addr))
            self.watch.forget(face)
        self.on_state(face)
