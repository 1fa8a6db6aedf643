# WiFi links to the bridge: TCP and UDP (links.py picks them).
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. links.from_config loads
# only the module of the configured link.
import asyncio


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
                # MicroPython's Stream.close() leaves the socket open (its wait_closed()
                # closes it): close it now, or each reconnect holds a socket (and with TLS
                # mbedTLS's ~24 kB of buffers) until the garbage collector finds it
                s = getattr(self._w, "s", None)
                if s is not None:
                    s.close()
            except OSError:
                pass
            self._w = None
            self._r = None


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
            # asyncio has no public await on a raw socket: its own streams do this
            yield asyncio.core._io_queue.queue_read(s)  # noqa: SLF001

    async def write(self, mv):
        self._s.send(mv)

    def close(self):
        if self._s is not None:
            self._s.close()
            self._s = None
