# The simulated board's link: a pseudo-terminal (links.py picks it).
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. links.from_config loads
# only the module of the configured link.
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
