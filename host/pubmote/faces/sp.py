"""SP-over-TCP endpoints that nanomsg (nanocat) and nng (pynng) clients connect to.

--sp-pub: a PUB socket; every relayed message goes to every connected SUB as
`<topic URI>|<payload>` (the SUB filters, as in nanomsg). A slow subscriber gets a bounded
buffer; what does not fit is dropped and counted, and the others are unaffected.
--sp-sub: a SUB socket; PUB clients publish `<topic URI>|<payload>` into the bridge.
URLs: tcp://HOST:PORT (IPv4 or [IPv6]) and ipc:///path (a unix socket, as nanomsg's ipc).
The filters and the SP-TCP bytes: docs/protocols/filters.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

from pubmote.core.addresses import AddressError, log_exposure, parse_tcp_url
from pubmote.core.hub import Hub, Message
from pubmote.core.latency import LatencyHist
from pubmote.faces import unixpath
from pubmote_wire import name as ndn_name
from pubmote_wire import sp
from pubmote_wire.errors import DecodeError

log = logging.getLogger("pubmote.sp")

PER_CLIENT_BUFFER = 1 << 20
MAX_SNDBUF = 256 * 1024
FLUSH_S = 2.0  # how long a stopping bridge waits for subscribers to take their buffers


def parse_url(url: str) -> tuple[str, Any]:
    """`tcp://127.0.0.1:5560` -> ("tcp", (host, port)); `ipc:///tmp/x` -> ("ipc", path)."""
    if url.startswith("ipc://"):
        return "ipc", url[len("ipc://"):]
    if not url.startswith("tcp://"):
        raise ValueError("SP URL must be tcp://HOST:PORT or ipc:///PATH, not %r" % url)
    try:
        return "tcp", parse_tcp_url(url)
    except AddressError as e:
        raise ValueError("SP URL %r: %s" % (url, e)) from None


async def _serve(url: str, proto: int, factory: Any) -> asyncio.AbstractServer:
    kind, where = parse_url(url)
    loop = asyncio.get_running_loop()
    if kind == "ipc":
        try:
            unixpath.prepare(where)
        except unixpath.SocketPathError as e:
            raise ValueError("SP endpoint %s: %s" % (url, e)) from None
        return await loop.create_unix_server(factory, where)
    host, port = where
    log_exposure(log, "the SP %s endpoint" % ("PUB" if proto == sp.PUB else "SUB"), url, host,
                 "SP has no authentication: anyone there receives every relayed message"
                 if proto == sp.PUB else "SP has no authentication: anyone there publishes")
    return await loop.create_server(factory, host, port, reuse_address=True)


class _Conn(asyncio.Protocol):
    def __init__(self, endpoint: SpEndpoint) -> None:
        self.ep = endpoint
        self.t: asyncio.Transport | None = None
        self.dec = sp.MsgDecoder(expect_header=sp.peer_of(endpoint.proto))
        self.peer = "?"
        self.ready = False
        self.bad = 0  # bad messages from this peer (logged, not flooded)
        # frames relayed during one turn of the event loop go out in one write: many boards'
        # messages in one turn cost one send instead of one each (SpEndpoint.flush)
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        # the transport's buffer as this turn's first frame was queued: it changes only
        # when the loop writes, or at our flush, so it holds until the flush
        self.t_bytes = 0

    def queue(self, frame: bytes) -> None:
        self.pending.append(frame)
        self.pending_bytes += len(frame)

    def flush(self) -> None:
        if self.pending and self.t is not None:
            self.t.write(b"".join(self.pending))
            self.ep.counters["writes"] += 1
        self.pending = []
        self.pending_bytes = 0

    def buffered(self) -> int:
        """Bytes waiting for this subscriber: queued this turn, and in the transport."""
        if not self.pending:
            self.t_bytes = self.t.get_write_buffer_size() if self.t else 0
        return self.pending_bytes + self.t_bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # the kernel's send buffer counts toward the subscriber's bound too: left alone,
            # loopback TCP autotunes it to megabytes on top of buffer_bytes
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                            min(self.ep.buffer_bytes, MAX_SNDBUF))
        peer = transport.get_extra_info("peername")
        self.peer = "%s:%s" % (peer[0], peer[1]) if isinstance(peer, tuple) else "ipc"
        transport.write(sp.header(self.ep.proto))
        self.ep.conns.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            msgs = self.dec.feed(data)
        except DecodeError as e:
            self.ep.counters["bad_streams"] += 1
            log.info("SP peer %s sent bad data: %s", self.peer, e)
            if self.t is not None:
                self.t.close()
            return
        except Exception:  # noqa: BLE001 - nothing a peer sends may end the bridge
            self._failed()
            return
        if self.dec.peer_proto is not None:
            self.ready = True
        try:
            for m in msgs:
                self.ep.on_message(self, m)
        except Exception:  # noqa: BLE001 - nothing a peer sends may end the bridge
            self._failed()

    def _failed(self) -> None:
        """Our own code failed on what this peer sent: counted, logged (the first, then
        every 1000th), and the connection closed."""
        self.ep.counters["errors"] += 1
        n = self.ep.counters["errors"]
        if n == 1 or n % 1000 == 0:
            log.exception("SP %s: handling data from %s failed (%d so far); closing that "
                          "connection", self.ep.url, self.peer, n)
        if self.t is not None:
            self.t.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.ep.conns.discard(self)
        self.t = None


class SpEndpoint:
    """One bound SP socket (PUB or SUB) attached to the hub."""

    def __init__(self, hub: Hub, url: str, proto: int,
                 buffer_bytes: int = PER_CLIENT_BUFFER) -> None:
        self.hub = hub
        self.url = url
        self.proto = proto
        self.buffer_bytes = buffer_bytes
        self.conns: set[_Conn] = set()
        self.server: asyncio.AbstractServer | None = None
        self._ipc: tuple[str, tuple[int, int] | None] | None = None  # our socket file
        self.counters = {"sent": 0, "dropped": 0, "received": 0, "bad_messages": 0,
                         "bad_streams": 0, "unflushed": 0, "writes": 0, "errors": 0}
        # bridge-added latency: from a face's read of each message to the write that hands
        # it to the subscribers' sockets
        self.latency = LatencyHist()
        self._t_pending: list[float] = []  # read times of this turn's messages

    async def start(self) -> None:
        self.server = await _serve(self.url, self.proto, lambda: _Conn(self))
        kind, where = parse_url(self.url)
        if kind == "ipc":
            self._ipc = where, unixpath.identity(where)
        if self.proto == sp.PUB:
            self.hub.add_listener(self.relay)
            self.hub.add_flusher(self.flush)

    def relay(self, msg: Message) -> None:
        line = msg.line()
        frame = sp.encode_msg(line)
        journal = self.hub.journal is not None
        queued = False
        for c in self.conns:
            if c.t is None or not c.ready:
                continue
            if c.buffered() + len(frame) > self.buffer_bytes:
                self.counters["dropped"] += 1
                self.hub.journal_outcome(msg, "sp:" + c.peer, "dropped")
                continue
            c.queue(frame)
            queued = True
            self.counters["sent"] += 1
            if journal:
                self.hub.journal_outcome(msg, "sp:" + c.peer, "delivered")
        if queued:
            self._t_pending.append(msg.t_recv)
            # the hub writes them at the end of the turn, before it sends any ack
            self.hub.flush_soon()

    def flush(self) -> None:
        """Hand this turn's frames to every subscriber's socket, one write each (the hub
        calls it at the end of every turn, before the turn's acks leave)."""
        for c in self.conns:
            c.flush()
        if self._t_pending:
            self.latency.add_since(time.time(), self._t_pending)
            self._t_pending = []

    def on_message(self, conn: _Conn, body: bytes) -> None:
        if self.proto != sp.SUB:
            return  # a SUB peer of our PUB has nothing to say; ignore, as nanomsg does
        topic, sep, payload = body.partition(b"|")
        try:
            if not sep or not topic.startswith(b"/"):
                raise DecodeError("SP message is not <topic URI>|<payload>")
            canonical = ndn_name.to_uri(ndn_name.from_uri(topic.decode()))
        except (DecodeError, UnicodeDecodeError, ValueError) as e:
            self.counters["bad_messages"] += 1
            conn.bad += 1
            if conn.bad == 1 or conn.bad % 1000 == 0:  # said, not flooded
                why = "no | between topic and payload" if not sep else (
                    "the topic does not start with /" if not topic.startswith(b"/") else
                    "the topic is not an NDN name URI (%s)" % e)
                log.warning("SP %s: dropped %d bad message(s) from %s, e.g. %r: %s; send "
                            "<topic URI>|<payload>, e.g. /pubmote/demo/sim1/command|hi",
                            self.url, conn.bad, conn.peer, bytes(body[:60]), why)
            return
        self.counters["received"] += 1
        self.hub.publish(Message(canonical.encode(), payload, "sp:" + conn.peer, "sp-sub"))

    def clients(self) -> int:
        return len(self.conns)

    async def close(self, flush_s: float = FLUSH_S) -> None:
        """Stop, after handing subscribers what they were promised: a message acked to a
        board sits in its subscribers' buffers, so those are flushed before the sockets
        close (for up to flush_s; a subscriber that has not taken everything by then loses
        the rest, counted in `unflushed` and logged)."""
        if self.proto == sp.PUB:
            self.hub.remove_listener(self.relay)
        if self.server is not None:
            self.server.close()
        self.hub.flush_relays()  # this endpoint's frames, and the acks waiting behind them
        self.hub.remove_flusher(self.flush)
        self.flush()
        deadline = asyncio.get_running_loop().time() + flush_s
        while any(c.t is not None and c.t.get_write_buffer_size() for c in self.conns):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.01)
        for c in list(self.conns):
            if c.t is not None:
                left = c.t.get_write_buffer_size()
                if left:
                    self.counters["unflushed"] += 1
                    log.warning("SP subscriber %s did not take its buffer within %.1f s: "
                                "%d bytes not sent", c.peer, flush_s, left)
                    c.t.abort()
                else:
                    c.t.close()
        if self.server is not None:
            await self.server.wait_closed()
        if self._ipc is not None:
            unixpath.remove(*self._ipc)
            self._ipc = None
