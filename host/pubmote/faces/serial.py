"""A board on a serial line (pyserial): reopened when the port disappears and comes back,
with one clear log line per open failure."""

from __future__ import annotations

import asyncio
import logging
import os
import random

import serial

from pubmote.faces.board import OUT_LIMIT_BYTES, BoardFace, FaceHandler, PacketHandler

log = logging.getLogger("pubmote.faces")


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
            self.set_up(True)
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
        self.set_up(False)

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
