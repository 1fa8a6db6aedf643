# A hardware UART link (links.py picks it).
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. links.from_config loads
# only the module of the configured link.
# readinto and write wait on asyncio's I/O poller themselves, as asyncio.StreamReader does
# inside: the board loads no stream.py (~0.9 kB of heap) and a write copies nothing (a
# stream appends what the UART did not take at once to a growing bytes object).
from asyncio import core, sleep_ms

from pubmote_wire.compat import const

_TXBUF = const(64)


class UartLink:
    """A hardware UART (ESP32, RP2040): machine.UART with the profile's pins and baud rate."""

    # rxbuf: the UART's receive ring (on the board's heap on rp2): 44 ms of the line at
    # 115200 baud for the read loop to come round (it takes 256 bytes a read, face.py).
    # Twice the longest the loop is held by a write: rp2's UART.write waits in C until all
    # but the transmit ring's worth of a frame part (258 B, 22 ms) has gone out. 1024
    # would hold 0.5 kB more for good.
    # _TXBUF: rp2's transmit ring (its heap too; 256 B by default). A smaller one holds a
    # write in C a little longer (17 ms, not 0, for a 258-byte part), within the receive
    # ring's 44 ms; rp2 only (ESP32's driver takes 0 or more than its 128-byte FIFO)
    def __init__(self, uart_id=1, baudrate=115200, tx=None, rx=None, rxbuf=512):
        self.args = (uart_id, baudrate, tx, rx, rxbuf)
        self._u = None

    async def open(self):
        from sys import platform

        from machine import UART, Pin

        uart_id, baud, tx, rx, rxbuf = self.args
        kw = {"rxbuf": rxbuf}
        if platform == "rp2":
            kw["txbuf"] = _TXBUF
        if tx is not None:
            kw["tx"] = Pin(tx)
            kw["rx"] = Pin(rx)
        self._u = UART(uart_id, baudrate=baud, **kw)

    # Generators, not async defs: a MicroPython coroutine that yields the I/O queue's
    # registration is what awaits a stream (the task runs again once the poller says so).
    def readinto(self, buf):
        u = self._u
        yield core._io_queue.queue_read(u)  # noqa: SLF001 - as asyncio's own streams
        return u.readinto(buf) or 0

    def write(self, mv):
        u = self._u
        n = len(mv)
        off = u.write(mv) or 0
        if off >= n:
            # always give the other tasks a turn, as a stream's drain() does
            yield from sleep_ms(0)
            return
        while off < n:
            yield core._io_queue.queue_write(u)  # noqa: SLF001 - as asyncio's own streams
            off += u.write(mv[off:]) or 0

    def close(self):
        if self._u is not None:
            try:
                self._u.deinit()
            except (AttributeError, OSError):
                pass
            self._u = None
