"""SP-over-TCP endpoints that nanomsg (nanocat) and nng (pynng) clients connect to.

--sp-pub: a PUB socket; every relayed message goes to every connected SUB as
`<topic URI>|<payload>` (the SUB filters, as in nanomsg). A slow subscriber gets a bounded
buffer; what does not fit is dropped and counted, and the others are unaffected.
--sp-sub: a SUB socket; PUB clients publish `<topic URI>|<payload>` into the bridge.
URLs: tcp://HOST:PORT (IPv4 or [IPv6]) and ipc:///path (a unix socket, as nanomsg's ipc).
SP has no authentication: a SUB endpoint bound beyond loopback needs its allow-lists (the
sources that may connect, the topics they may publish into: core/allowlist.py).
The filters and the SP-TCP bytes: docs/protocols/filters.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import Any

from pubmote.core.addresses import AddressError, log_exposure, parse_tcp_url
from pubmote.core.admission import Admission, source_of
from pubmote.core.allowlist import AllowList
from pubmote.core.allowlist import exposed_problem as _exposed
from pubmote.core.hub import Hub, Message
from pubmote.core.latency import LatencyHist
from pubmote.core.limits import LimitHits, Limits
from pubmote.faces import unixpath
from pubmote.faces.sp_sent import SentLog
from pubmote_wire import name as ndn_name
from pubmote_wire import sp
from pubmote_wire.errors import DecodeError

log = logging.getLogger("pubmote.sp")

PER_CLIENT_BUFFER = 1 << 20
MAX_SNDBUF = 256 * 1024
FLUSH_S = 2.0  # how long a stopping bridge waits for subscribers to take their buffers
CONFIRM_S = 0.05  # how often buffers still holding messages are looked at again


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


def exposed_problem(url: str, sources: list[str], topics: list[str]) -> str | None:
    """Why the SP SUB endpoint at url may not be bound with these allow-lists (None if it
    may): beyond loopback it needs both sp_sub_allow_from and sp_sub_allow_topics."""
    try:
        kind, where = parse_url(url)
    except ValueError:
        return None  # said by the URL's own check
    if kind != "tcp":
        return None  # a unix socket: this host only
    return _exposed("the SP SUB endpoint", url, where[0], sources, topics,
                    ("sp_sub_allow_from", "sp_sub_allow_topics"),
                    "topic prefixes they may publish into, e.g. /pubmote/demo/sim1/command")


async def _serve(url: str, proto: int, factory: Any, allow: AllowList
                 ) -> asyncio.AbstractServer:
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
                 if proto == sp.PUB else "SP has no authentication; only %s may connect, and "
                 "publish only into %s" % (
                     ", ".join(str(n) for n in allow.nets),
                     ", ".join(ndn_name.to_uri(p) for p in allow.prefixes)))
    return await loop.create_server(factory, host, port, reuse_address=True)


class SpConn(asyncio.Protocol):
    """One SP peer's connection to an endpoint: its decoder, its transport, its egress."""

    def __init__(self, endpoint: SpEndpoint) -> None:
        self.ep = endpoint
        self.t: asyncio.Transport | None = None
        self.dec = sp.MsgDecoder(expect_header=sp.peer_of(endpoint.proto))
        self.peer = "?"
        self.egress = "sp:?"
        self.ready = False
        self.bad = 0  # bad messages from this peer (logged, not flooded)
        # frames relayed during one turn of the event loop go out in one write: many boards'
        # messages in one turn cost one send instead of one each (SpEndpoint.flush)
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        # the transport's buffer as this turn's first frame was queued: it changes only
        # when the loop writes, or at our flush, so it holds until the flush
        self.t_bytes = 0
        self.sent = SentLog(None, 0)  # replaced once connected
        self._source: str | None = None
        self._admitted = False
        self._aborted = False  # by us: what the transport still held is gone
        self._handshake: asyncio.TimerHandle | None = None

    def flush(self) -> None:
        # a transport closing (reset, or closed by us) takes no more bytes: what is
        # pending stays unwritten and counts as lost when the connection goes
        if self.pending and self.t is not None and not self.t.is_closing():
            self.t.write(b"".join(self.pending))
            self.sent.wrote(self.pending_bytes, self.t.get_write_buffer_size())
            self.ep.counters["writes"] += 1
        self.pending = []
        self.pending_bytes = 0

    def buffered(self) -> int:
        """Bytes waiting for this subscriber: queued this turn, and in the transport."""
        if not self.pending:
            self.t_bytes = self.t.get_write_buffer_size() if self.t else 0
        return self.pending_bytes + self.t_bytes

    def outstanding(self) -> int:
        """Bytes not yet taken by the subscriber's host: in the transport, in the kernel."""
        if self.t is None:
            return 0
        return self.t.get_write_buffer_size() + self.sent.unacked()

    def confirm(self, lost: bool = False) -> None:
        """Count (and journal) as sent the messages whose bytes have left the host."""
        if not self.sent.entries:
            return
        if lost:
            buffered = None if self._aborted else 0
        elif self.t is None or self.t.is_closing():
            # a reset empties the transport's buffer before connection_lost is called:
            # that empty buffer says nothing about what left, connection_lost will
            return
        else:
            buffered = self.t.get_write_buffer_size()
        self.ep.sent(self, self.sent.take_sent(self.sent.sent_end(buffered)))

    def abort(self) -> None:
        self._aborted = True
        if self.t is not None:
            self.t.abort()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        self._source = source_of(peer)
        allow = self.ep.allow
        if not allow.source_ok(peer):
            allow.say(log, allow.refused_source, "SP %s: closed a connection from %s, "
                      "outside sp_sub_allow_from", self.ep.url, peer[0])
            transport.abort()
            return
        if not self.ep.admission.admit(self._source):
            transport.abort()
            return
        self._admitted = True
        self.t = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # the kernel's send buffer counts toward the subscriber's bound too: left alone,
            # loopback TCP autotunes it to megabytes on top of buffer_bytes
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                            min(self.ep.buffer_bytes, MAX_SNDBUF))
        self.peer = "%s:%s" % (peer[0], peer[1]) if isinstance(peer, tuple) else "ipc"
        self.egress = "sp:" + self.peer
        header = sp.header(self.ep.proto)
        transport.write(header)
        self.sent = SentLog(sock, len(header))
        self._handshake = asyncio.get_running_loop().call_later(
            self.ep.handshake_timeout_s, self._handshake_expired)
        self.ep.conns.add(self)

    def _handshake_expired(self) -> None:
        self._handshake = None
        if not self.ready:
            self.ep.hits.hit("sp_handshake_timeout_s", "SP %s: %s sent no SP header in %.0f s",
                             self.ep.url, self.peer, self.ep.handshake_timeout_s)
            self.abort()

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
        if self.dec.peer_proto is not None and not self.ready:
            self.ready = True
            if self._handshake is not None:
                self._handshake.cancel()
                self._handshake = None
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
        if not self._admitted:
            return
        self._admitted = False
        self.ep.admission.release(self._source)
        if self._handshake is not None:
            self._handshake.cancel()
            self._handshake = None
        if exc is not None:
            self._aborted = True
        self.confirm(lost=True)
        self.ep.lost(self, self.sent.take_all())
        self.ep.conns.discard(self)
        self.t = None


class SpEndpoint:
    """One bound SP socket (PUB or SUB) attached to the hub, within its connection caps
    (sp_max_conns, sp_max_conns_per_ip); a peer that sends no SP header within
    sp_handshake_timeout_s is cut off (docs/limits.md).

    A PUB subscriber's messages are counted `sent` (and journaled "delivered") once their
    bytes have left the host (sp_sent.py), and `dropped` (journaled "dropped") when its
    buffer is full, when it had not finished its SP handshake, or when its connection was
    lost before they left."""

    def __init__(self, hub: Hub, url: str, proto: int,
                 buffer_bytes: int = PER_CLIENT_BUFFER, *, limits: Limits | None = None,
                 hits: LimitHits | None = None, allow: AllowList | None = None) -> None:
        lim = limits if limits is not None else Limits()
        self.hub = hub
        # who may connect and publish where (SUB endpoints; empty lists admit everything)
        self.allow = allow if allow is not None else AllowList()
        self.url = url
        self.proto = proto
        self.buffer_bytes = buffer_bytes
        self.hits = hits if hits is not None else LimitHits()
        self.admission = Admission("SP %s" % url, max_total=lim.sp_max_conns,
                                   max_per_ip=lim.sp_max_conns_per_ip, hits=self.hits,
                                   total_key="sp_max_conns", per_ip_key="sp_max_conns_per_ip")
        self.handshake_timeout_s = lim.sp_handshake_timeout_s
        self.max_unconfirmed = lim.sp_max_unconfirmed
        self.conns: set[SpConn] = set()
        self.server: asyncio.AbstractServer | None = None
        self._ipc: tuple[str, tuple[int, int] | None] | None = None  # our socket file
        self.counters = {"queued": 0, "sent": 0, "dropped": 0, "dropped_handshake": 0,
                         "dropped_lost": 0, "received": 0, "bad_messages": 0,
                         "bad_streams": 0, "unflushed": 0, "writes": 0, "errors": 0,
                         "refused": 0}
        # bridge-added latency: from a face's read of each message to the write that hands
        # it to the subscribers' sockets
        self.latency = LatencyHist()
        self._t_pending: list[float] = []  # read times of this turn's messages
        self._confirm_due: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        if self.proto == sp.SUB:
            why = exposed_problem(self.url, [str(n) for n in self.allow.nets],
                                  [ndn_name.to_uri(p) for p in self.allow.prefixes])
            if why:
                raise ValueError(why)
        self.server = await _serve(self.url, self.proto, lambda: SpConn(self), self.allow)
        kind, where = parse_url(self.url)
        if kind == "ipc":
            self._ipc = where, unixpath.identity(where)
        if self.proto == sp.PUB:
            self.hub.add_listener(self.relay)
            self.hub.add_flusher(self.flush)

    def relay(self, msg: Message) -> None:
        line = msg.line()
        frame = sp.encode_msg(line)
        size = len(frame)
        journal = self.hub.journaling
        tracked = msg if journal else None
        counters = self.counters
        queued = 0
        for c in self.conns:
            if not c.ready:
                # not a subscriber yet (its SP header not in): it never gets this one
                counters["dropped"] += 1
                counters["dropped_handshake"] += 1
            else:
                sent = c.sent
                entries = sent.entries
                if (len(entries) < self.max_unconfirmed
                        and c.buffered() + size <= self.buffer_bytes):
                    c.pending.append(frame)
                    c.pending_bytes += size
                    end = sent.queued_end = sent.queued_end + size
                    entries.append((end, tracked))  # counted sent once its bytes left
                    queued += 1
                    continue
                counters["dropped"] += 1
            if journal:
                self.hub.journal_outcome(msg, c.egress, "dropped")
        if queued:
            counters["queued"] += queued
            self._t_pending.append(msg.t_recv)
            # the hub writes them at the end of the turn, before it sends any ack
            self.hub.flush_soon()

    def flush(self) -> None:
        """Hand this turn's frames to every subscriber's socket, one write each (the hub
        calls it at the end of every turn, before the turn's acks leave)."""
        waiting = False
        for c in self.conns:
            c.flush()
            c.confirm()
            waiting = waiting or bool(c.sent.entries)
        if self._t_pending:
            self.latency.add_since(time.time(), self._t_pending)
            self._t_pending = []
        if waiting and self._confirm_due is None:
            self._confirm_due = asyncio.get_running_loop().call_later(CONFIRM_S, self._recheck)

    def _recheck(self) -> None:
        # bytes leave the buffers between our writes: look again until all have left
        self._confirm_due = None
        waiting = False
        for c in self.conns:
            c.confirm()
            waiting = waiting or bool(c.sent.entries)
        if waiting:
            self._confirm_due = asyncio.get_running_loop().call_later(CONFIRM_S, self._recheck)

    def sent(self, conn: SpConn, msgs: deque[tuple[int, Message | None]]) -> None:
        """Messages whose bytes have left the host for conn's subscriber."""
        self.counters["sent"] += len(msgs)
        if self.hub.journaling:
            for _, m in msgs:
                if m is not None:
                    self.hub.journal_outcome(m, conn.egress, "delivered")

    def lost(self, conn: SpConn, msgs: deque[tuple[int, Message | None]]) -> None:
        """Messages still in conn's buffers when its connection was lost."""
        if not msgs:
            return
        self.counters["dropped"] += len(msgs)
        self.counters["dropped_lost"] += len(msgs)
        if self.hub.journaling:
            for _, m in msgs:
                if m is not None:
                    self.hub.journal_outcome(m, conn.egress, "dropped")
        log.info("SP subscriber %s gone with %d message(s) not sent", conn.peer, len(msgs))

    def on_message(self, conn: SpConn, body: bytes) -> None:
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
        if not self.allow.name_ok(ndn_name.from_uri(canonical)):
            self.allow.say(log, self.allow.refused_name, "SP %s: refused a message from %s "
                           "on %s, outside sp_sub_allow_topics", self.url, conn.peer,
                           canonical)
            return
        if self.hub.unsigned_refused(canonical.encode(), "SP message from %s on %s"
                                     % (conn.peer, canonical)):
            self.counters["refused"] += 1
            return
        self.counters["received"] += 1
        self.hub.publish(Message(canonical.encode(), payload, conn.egress, "sp-sub"))

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
        if self._confirm_due is not None:
            self._confirm_due.cancel()
            self._confirm_due = None
        deadline = asyncio.get_running_loop().time() + flush_s
        while any(c.outstanding() for c in self.conns):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.01)
        for c in list(self.conns):
            if c.t is not None:
                c.confirm()
                left = c.outstanding()
                if left:
                    self.counters["unflushed"] += 1
                    log.warning("SP subscriber %s did not take its buffer within %.1f s: "
                                "%d bytes not sent", c.peer, flush_s, left)
                    self.lost(c, c.sent.take_all())  # now: the loop may end before it says
                    c.abort()
                else:
                    c.t.close()
        if self.server is not None:
            await self.server.wait_closed()
        if self._ipc is not None:
            unixpath.remove(*self._ipc)
            self._ipc = None
