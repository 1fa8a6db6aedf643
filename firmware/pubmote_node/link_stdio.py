# The USB CDC link: the board's stdin/stdout (links.py picks it).
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. links.from_config loads
# only the module of the configured link.
import asyncio


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
