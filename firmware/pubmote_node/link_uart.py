# A hardware UART link (links.py picks it).
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. links.from_config loads
# only the module of the configured link.
import asyncio


class UartLink:
    """A hardware UART (ESP32, RP2040): machine.UART with the profile's pins and baud rate."""

    def __init__(self, uart_id=1, baudrate=115200, tx=None, rx=None, rxbuf=1024):
        self.args = (uart_id, baudrate, tx, rx, rxbuf)
        self._u = None
        self._r = None

    async def open(self):
        from machine import UART, Pin

        uart_id, baud, tx, rx, rxbuf = self.args
        if tx is None:
            self._u = UART(uart_id, baudrate=baud, rxbuf=rxbuf)
        else:
            self._u = UART(uart_id, baudrate=baud, tx=Pin(tx), rx=Pin(rx), rxbuf=rxbuf)
        self._r = asyncio.StreamReader(self._u)

    async def readinto(self, buf):
        return (await self._r.readinto(buf)) or 0

    async def write(self, mv):
        self._r.write(mv)
        await self._r.drain()

    def close(self):
        if self._u is not None:
            try:
                self._u.deinit()
            except (AttributeError, OSError):
                pass
            self._u = None
