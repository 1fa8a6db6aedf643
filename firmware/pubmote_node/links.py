# Byte links between a board and its bridge: pty (simulated board), UART, USB CDC (stdio), TCP, UDP.
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting.
import asyncio


class PtyLink:
    """The simulated board's line: a pseudo-terminal path, opened as a real board's UART is."""

    def __init__(self, path):
        self.path = path
        self._f = None
        self._r = None

    async def open(self):
        import termios

        f = open(self.path, "r+b")
        fd = f.fileno()
        termios.setraw(fd)
        attr = termios.tcgetattr(fd)
        # VMIN=0, VTIME=0: a read never blocks the whole interpreter
        attr[6][6] = 0
        attr[6][5] = 0
        termios.tcsetattr(fd, termios.TCSANOW, attr)
        self._f = f
        self._r = asyncio.StreamReader(f)

    async def readinto(self, buf):
        n = await self._r.readinto(buf)
        return n or 0

    async def write(self, mv):
        f = self._f
        off = 0
        end = len(mv)
        while off < end:
            n = f.write(mv[off:end])
            if n is None:
                n = 0
            off += n
            if off < end:
                await asyncio.sleep_ms(1)

    def close(self):
        if self._f is not None:
            try:
                self._f.close()
            except OSError:
                pass
            self._f = None


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


class StdioLink:
    """USB CDC: the board's stdin/stdout. The REPL is gone while the node runs."""

    def __init__(self):
        self._r = None
        self._w = None

    async def open(self):
        import sys

        try:
            import micropython

            micropython.kbd_intr(-1)  # 0x03 is data in a frame, not Ctrl-C, from now on
        except (ImportError, AttributeError):
            pass
        self._r = asyncio.StreamReader(sys.stdin.buffer)
        self._w = sys.stdout.buffer

    async def readinto(self, buf):
        return (await self._r.readinto(buf)) or 0

    async def write(self, mv):
        self._w.write(mv)

    def close(self):
        pass


class TcpLink:
    """WiFi TCP to the bridge's --tcp face (ESP32, Pico W; the unix port for tests)."""

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self._r = None
        self._w = None

    async def open(self):
        self._r, self._w = await asyncio.open_connection(self.host, self.port)

    async def readinto(self, buf):
        return (await self._r.readinto(buf)) or 0

    async def write(self, mv):
        self._w.write(mv)
        await self._w.drain()

    def close(self):
        if self._w is not None:
            try:
                self._w.close()
            except OSError:
                pass
            self._w = None


class UdpLink:
    """WiFi UDP to the bridge's --udp face: one frame per datagram. asyncio on MicroPython
    has no datagram API, so the socket is non-blocking and polled through the I/O queue."""

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self._s = None

    async def open(self):
        import socket

        ai = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_DGRAM)[0]
        s = socket.socket(ai[0], socket.SOCK_DGRAM)
        s.setblocking(False)
        s.connect(ai[-1])
        self._s = s

    async def readinto(self, buf):
        s = self._s
        while True:
            try:
                data = s.recv(len(buf))
            except OSError as e:
                if e.args[0] != 11:  # EAGAIN
                    raise
                data = None
            if data:
                n = len(data)
                buf[0:n] = data
                return n
            yield asyncio.core._io_queue.queue_read(s)

    async def write(self, mv):
        self._s.send(mv)

    def close(self):
        if self._s is not None:
            self._s.close()
            self._s = None


def from_config(cfg):
    """Build the link a board's config names: {"link": "pty"|"uart"|"stdio"|"tcp"|"udp", ...}."""
    kind = cfg.get("link", "pty")
    if kind == "pty":
        return PtyLink(cfg["path"])
    if kind == "uart":
        return UartLink(cfg.get("uart", 1), cfg.get("baud", 115200), cfg.get("tx"), cfg.get("rx"))
    if kind == "stdio":
        return StdioLink()
    if kind == "tcp":
        return TcpLink(cfg["host"], cfg["port"])
    if kind == "udp":
        return UdpLink(cfg["host"], cfg["port"])
    raise ValueError("unknown link %r" % kind)
