"""Board faces: the bridge's end of a board's link (serial via pyserial, TCP, UDP).

Byte streams carry the codec's link framing (COBS + CRC); a face turns frames into NDN
packets for the hub and back. Every outgoing buffer is bounded and counts what it drops.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import random
from collections.abc import Callable
from typing import Any, cast

import serial

from pubmote_wire import framing

log = logging.getLogger("pubmote.faces")

MAX_PACKET = 1024
MAX_FRAME = framing.frame_size_max(MAX_PACKET)
OUT_LIMIT_BYTES = 64 * 1024

_ids = itertools.count(1)


def next_face_id() -> int:
    """Face ids are unique across every kind of face (boards, NDN apps)."""
    return next(_ids)

PacketHandler = Callable[["BoardFace", bytes], None]
FaceHandler = Callable[["BoardFace"], None]


class BoardFace:
    """A framed byte link to one board. Subclasses provide _write_raw and lifetime."""

    kind = "?"

    def __init__(self, label: str, on_packet: PacketHandler, on_state: FaceHandler) -> None:
        self.face_id = next_face_id()
        self.label = label
        self.on_packet = on_packet
        self.on_state = on_state
        self.decoder = framing.FrameDecoder(MAX_FRAME)
        self.up = False
        self.board: str | None = None  # set by the hub when the board registers
        self.tracer: Any = None  # set by the hub when --trace is on
        self.counters = {"rx_frames": 0, "tx_frames": 0, "tx_dropped": 0, "rx_bytes": 0,
                         "tx_bytes": 0, "opens": 0}

    def send_packet(self, pkt: bytes) -> None:
        if not self.up:
            self.counters["tx_dropped"] += 1
            return
        if self.tracer is not None:
            self.tracer.record(self.label, "out", pkt)
        frame = framing.encode(pkt)
        if self._write_raw(frame):
            self.counters["tx_frames"] += 1
            self.counters["tx_bytes"] += len(frame)
        else:
            self.counters["tx_dropped"] += 1

    def _write_raw(self, frame: bytes) -> bool:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> None:
        self.counters["rx_bytes"] += len(chunk)
        for pkt in self.decoder.feed(chunk):
            self.counters["rx_frames"] += 1
            self.on_packet(self, bytes(pkt))

    def bad_frames(self) -> int:
        d = self.decoder
        return int(d.frames_bad_crc + d.frames_bad_cobs + d.frames_oversize)

    def _set_up(self, up: bool) -> None:
        if up != self.up:
            self.up = up
            self.on_state(self)

    async def run(self) -> None:
        """Keep the face up until cancelled (reconnecting where the link allows it)."""
        raise NotImplementedError

    def close(self) -> None:
        self._set_up(False)


OPEN_ERROR_REPEAT_S = 30.0


def open_error(port: str, err: BaseException) -> str:
    """Why a serial port does not open, as one line with what to do about it."""
    text = str(err)
    if not os.path.exists(port):
        return ("cannot open: no such port (board unplugged, or a wrong name? "
                "ls /dev/ttyUSB* /dev/ttyACM* lists serial ports)")
    if "ermission denied" in text:
        return ("cannot open: permission denied (add yourself to the dialout group: "
                "sudo usermod -aG dialout $USER, then log in again)")
    if "busy" in text or "lock" in text.lower():
        return ("cannot open: the port is busy (close screen, minicom, mpremote or another "
                "bridge using it)")
    return "cannot open: %s" % text


class SerialFace(BoardFace):
    """A board on a serial port (USB CDC, UART adapter, or a simulated board's pty).

    The port is opened with pyserial; when it disappears (cable pulled, board reset) the
    face goes down and reopens it with jittered, capped backoff.
    """

    kind = "serial"

    def __init__(self, port: str, baud: int, on_packet: PacketHandler,
                 on_state: FaceHandler, quiet_s: float = 0.0) -> None:
        # a simulated board's pty sits deep in a temporary directory: show its name only
        shown = port if port.startswith("/dev/") else os.path.basename(port)
        super().__init__("serial:%s" % shown, on_packet, on_state)
        self.port = port
        self.baud = baud
        self._ser: serial.Serial | None = None
        self._fd = -1
        self._out = bytearray()
        self._lost: asyncio.Event | None = None
        self.last_error = ""
        # a simulated board's pty appears a moment after the bridge starts: say nothing of
        # a port that does not open for this long (a real port is reported at once)
        self.quiet_s = quiet_s

    def _open(self) -> None:
        self._ser = serial.Serial(self.port, self.baud, timeout=0, write_timeout=0,
                                  exclusive=True)
        self._fd = self._ser.fileno()
        os.set_blocking(self._fd, False)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.1
        told = 0.0  # when the user was last told that the port does not open
        quiet_until = loop.time() + self.quiet_s
        while True:
            try:
                self._open()
            except (serial.SerialException, OSError) as e:
                now = loop.time()
                error = open_error(self.port, e)
                if now < quiet_until:
                    pass
                elif error != self.last_error or now - told >= OPEN_ERROR_REPEAT_S:
                    # the first failure, a new reason, then every half minute: a wrong
                    # port is never silent, a board not plugged in yet does not flood the log
                    log.warning("serial %s: %s; retrying until it opens", self.port, error)
                    told = now
                if now >= quiet_until:
                    self.last_error = error
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 2.0)
                continue
            if self.last_error:
                log.info("serial %s: open now", self.port)
            self.last_error = ""
            backoff = 0.1
            self.counters["opens"] += 1
            self._lost = asyncio.Event()
            loop.add_reader(self._fd, self._on_readable)
            self._set_up(True)
            try:
                await self._lost.wait()
            finally:
                self._teardown(loop)
            await asyncio.sleep(0.1)

    def _teardown(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._fd >= 0:
            loop.remove_reader(self._fd)
            loop.remove_writer(self._fd)
        if self._ser is not None:
            try:
                self._ser.close()
            except (serial.SerialException, OSError):
                pass
        self._ser = None
        self._fd = -1
        self._out.clear()
        self._set_up(False)

    def _fail(self, err: BaseException) -> None:
        self.last_error = str(err)
        log.info("serial %s lost: %s", self.port, err)
        if self._lost is not None:
            self._lost.set()

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self._fd, 4096)
        except BlockingIOError:
            return
        except OSError as e:
            self._fail(e)
            return
        if not chunk:
            self._fail(EOFError("port closed"))
            return
        self.feed(chunk)

    def _write_raw(self, frame: bytes) -> bool:
        if self._fd < 0:
            return False
        if self._out:
            if len(self._out) + len(frame) > OUT_LIMIT_BYTES:
                return False
            self._out += frame
            return True
        try:
            n = os.write(self._fd, frame)
        except BlockingIOError:
            n = 0
        except OSError as e:
            self._fail(e)
            return False
        if n < len(frame):
            self._out += frame[n:]
            asyncio.get_running_loop().add_writer(self._fd, self._on_writable)
        return True

    def _on_writable(self) -> None:
        try:
            n = os.write(self._fd, self._out)
        except BlockingIOError:
            return
        except OSError as e:
            self._fail(e)
            return
        del self._out[:n]
        if not self._out:
            asyncio.get_running_loop().remove_writer(self._fd)

    def close(self) -> None:
        if self._lost is not None:
            self._lost.set()
        super().close()


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
        self.feed(data)

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
            self.on_state(face)
        face.feed(data)
