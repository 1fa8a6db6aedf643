"""Yamux over a Noise session: streams with flow-control windows, ping, go-away, resets.

The 12-byte header is version, type, flags (u16), stream id (u32), length (u32), all big
endian. The dialer (client) opens odd stream ids, the listener even ones. Each stream may
have at most its receive window (256 KiB at first) in flight, so a stream's buffer is
bounded by the window it granted; a peer that sends beyond it breaks the protocol and
loses the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections import deque
from collections.abc import Callable

from pubmote.p2p.codec import decode_uvarint, encode_uvarint
from pubmote.p2p.errors import MeshError, ProtocolError, StreamReset
from pubmote.p2p.identity import PeerId
from pubmote.p2p.noise import MAX_PLAINTEXT, NoiseSession

log = logging.getLogger(__name__)

PROTOCOL_ID = "/yamux/1.0.0"

TYPE_DATA = 0
TYPE_WINDOW_UPDATE = 1
TYPE_PING = 2
TYPE_GO_AWAY = 3

FLAG_SYN = 1
FLAG_ACK = 2
FLAG_FIN = 4
FLAG_RST = 8

GO_AWAY_NORMAL = 0
GO_AWAY_PROTOCOL_ERROR = 1
GO_AWAY_INTERNAL_ERROR = 2

INITIAL_WINDOW = 256 * 1024
_HEADER = struct.Struct(">BBHII")
_HEADER_SIZE = 12
# One DATA frame plus its header fits one Noise frame: one encryption per frame.
MAX_DATA_FRAME = MAX_PLAINTEXT - _HEADER_SIZE


class YamuxConfig:
    """Limits of one Yamux session (keyword-only)."""

    def __init__(self, *, max_streams: int = 256, window_bytes: int = INITIAL_WINDOW,
                 max_refused_streams: int = 64, max_write_buffer_bytes: int = 4 * 1024 * 1024,
                 max_pending_pings: int = 16, close_timeout_s: float = 60.0) -> None:
        if window_bytes < INITIAL_WINDOW:
            raise ValueError("window_bytes below the 256 KiB the spec starts with")
        self.max_streams = max_streams                # open streams, both directions
        self.window_bytes = window_bytes              # receive window we grant per stream
        self.max_refused_streams = max_refused_streams  # refusals before "stream flood"
        self.max_write_buffer_bytes = max_write_buffer_bytes  # unread control replies
        self.max_pending_pings = max_pending_pings
        # after our FIN, how long the remote may keep its half open before we reset it
        self.close_timeout_s = close_timeout_s


class Stream:
    """One Yamux stream: an ordered, flow-controlled, half-closable byte stream."""

    def __init__(self, session: YamuxSession, stream_id: int, outbound: bool,
                 window: int = INITIAL_WINDOW) -> None:
        self.session = session
        self.stream_id = stream_id
        self.outbound = outbound
        self.protocol = ""                     # set once multistream-select agreed
        self._chunks: deque[bytes] = deque()
        self._offset = 0                       # bytes of _chunks[0] already read
        self._buffered = 0
        self._recv_window = window             # credit the remote still has
        self._consumed = 0                     # read since our last window update
        self._send_window = INITIAL_WINDOW
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self.remote_closed = False             # FIN received
        self.local_closed = False              # FIN sent
        self.reset_reason = ""                 # non-empty once reset

    @property
    def remote_peer(self) -> PeerId:
        """The PeerId at the other end (authenticated by Noise)."""
        return self.session.remote_peer

    @property
    def buffered(self) -> int:
        """Bytes received and not yet read (at most the receive window)."""
        return self._buffered

    @property
    def send_window(self) -> int:
        """Bytes the remote lets us send before its next window update."""
        return self._send_window

    # -- called by the session -----------------------------------------------------------
    def on_data(self, payload: bytes) -> None:
        """A DATA frame's payload arrived (the session calls this)."""
        n = len(payload)
        if n > self._recv_window:
            raise ProtocolError("stream %d: %d bytes exceed the receive window of %d"
                                % (self.stream_id, n, self._recv_window))
        self._recv_window -= n
        if n:
            self._chunks.append(payload)
            self._buffered += n
            self._readable.set()

    def on_window_update(self, delta: int) -> None:
        """The remote granted `delta` more bytes to send (the session calls this)."""
        self._send_window += delta
        if self._send_window > 0xFFFFFFFF:
            raise ProtocolError("stream %d: send window overflow" % self.stream_id)
        if self._send_window > 0:
            self._writable.set()

    def on_fin(self) -> None:
        """The remote closed its half (the session calls this)."""
        self.remote_closed = True
        self._readable.set()
        if self.local_closed:
            self.session.forget(self)

    def on_reset(self, reason: str) -> None:
        """The stream is aborted: by the remote, or with its session (the session calls
        this; reset() is the local abort)."""
        if not self.reset_reason:
            self.reset_reason = reason
        # A reset aborts: what was buffered is dropped, readers get StreamReset.
        self._chunks.clear()
        self._offset = 0
        self._buffered = 0
        self._readable.set()
        self._writable.set()

    # -- reading -------------------------------------------------------------------------
    def _take(self, n: int) -> bytes:
        """Take up to n (n < 0: one chunk) buffered bytes and credit the window."""
        first = self._chunks[0]
        off = self._offset
        left = len(first) - off
        if n < 0 or left <= n:
            self._chunks.popleft()
            data = first[off:] if off else first
            self._offset = 0
        else:
            # An offset, not first[n:]: many small reads from one big frame (varint
            # prefixes, RPCs) must not copy the rest of the frame each time.
            data = first[off:off + n]
            self._offset = off + n
        self._buffered -= len(data)
        if not self._chunks:
            self._readable.clear()
        self._consumed += len(data)
        # Update the window once half of it was read: fewer frames, no stalls.
        if self._consumed >= self.session.config.window_bytes // 2 and not self.reset_reason:
            self._grant(self._consumed)
        return data

    def _grant(self, delta: int) -> None:
        self._recv_window += delta
        self._consumed = 0
        if not self.remote_closed:
            self.session.send_frame(TYPE_WINDOW_UPDATE, 0, self.stream_id, delta)

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (n < 0: whatever one frame brought); b"" at EOF.

        Raises StreamReset when the stream was reset or its connection closed.
        """
        while not self._chunks:
            if self.reset_reason:
                raise StreamReset(self.reset_reason)
            if self.remote_closed:
                return b""
            await self._readable.wait()
        return self._take(n)

    async def readexactly(self, n: int) -> bytes:
        """Exactly `n` bytes; asyncio.IncompleteReadError at EOF before that."""
        if self._chunks and len(self._chunks[0]) - self._offset >= n:
            return self._take(n)
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = await self.read(n - got)
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(parts), n)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    async def read_until_eof(self, limit: int) -> bytes:
        """Everything until the remote closes; ProtocolError past `limit` bytes."""
        parts: list[bytes] = []
        got = 0
        while True:
            chunk = await self.read()
            if not chunk:
                return b"".join(parts)
            got += len(chunk)
            if got > limit:
                raise ProtocolError("stream sent more than %d bytes" % limit)
            parts.append(chunk)

    async def read_lp(self, max_len: int) -> bytes:
        """One unsigned-varint length-prefixed message of at most `max_len` bytes."""
        head = bytearray()
        while True:
            b = await self.readexactly(1)
            head += b
            if b[0] < 0x80:
                break
            if len(head) >= 9:
                raise ProtocolError("length prefix too long")
        n, _ = decode_uvarint(head)
        if n > max_len:
            raise ProtocolError("message of %d bytes exceeds %d" % (n, max_len))
        return await self.readexactly(n) if n else b""

    # -- writing -------------------------------------------------------------------------
    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send `data`, waiting for send window and socket back-pressure as needed."""
        view = memoryview(data)
        total = len(view)
        off = 0
        session = self.session
        while True:
            if self.reset_reason:
                raise StreamReset(self.reset_reason)
            if self.local_closed:
                raise MeshError("write on a closed stream")
            if off >= total:
                return
            if self._send_window <= 0:
                self._writable.clear()
                await self._writable.wait()
                continue
            n = min(self._send_window, total - off, MAX_DATA_FRAME)
            session.send_data(self.stream_id, view[off:off + n])
            self._send_window -= n
            off += n
            await session.drain()

    async def write_lp(self, data: bytes) -> None:
        """Write one unsigned-varint length-prefixed message."""
        await self.write(encode_uvarint(len(data)) + data)

    async def close(self) -> None:
        """Half-close: send FIN; reading goes on until the remote closes too."""
        if self.local_closed or self.reset_reason:
            return
        self.local_closed = True
        self.session.send_frame(TYPE_WINDOW_UPDATE, FLAG_FIN, self.stream_id, 0)
        if self.remote_closed:
            self.session.forget(self)
        else:
            # A remote that never closes its half would hold a stream slot forever.
            asyncio.get_running_loop().call_later(self.session.config.close_timeout_s,
                                                  self._close_timed_out)
        with contextlib.suppress(ConnectionError, OSError):
            await self.session.drain()

    def _close_timed_out(self) -> None:
        if not self.remote_closed and not self.reset_reason:
            self.reset()

    def reset(self) -> None:
        """Abort the stream in both directions (RST)."""
        if self.reset_reason:
            return
        self.on_reset("reset locally")
        self.session.send_frame(TYPE_WINDOW_UPDATE, FLAG_RST, self.stream_id, 0)
        self.session.forget(self)


class YamuxSession:
    """A Yamux session: `run()` reads frames until the connection ends."""

    def __init__(self, secured: NoiseSession, *, is_client: bool,
                 on_stream: Callable[[Stream], None],
                 config: YamuxConfig | None = None, name: str = "") -> None:
        self.secured = secured
        self.is_client = is_client
        self.config = config or YamuxConfig()
        self.remote_peer = secured.remote_peer
        self.name = name or str(secured.remote_peer)
        self._on_stream = on_stream
        self._streams: dict[int, Stream] = {}
        self._next_id = 1 if is_client else 2
        self._pings: dict[int, asyncio.Future[float]] = {}
        self._ping_sent: dict[int, float] = {}
        self._ping_seq = 0
        self.closed = asyncio.Event()
        self.close_reason = ""
        self.remote_goaway = False
        self.refused_streams = 0       # inbound streams refused with RST (counted)
        self.dropped_frames = 0        # frames for streams we no longer know
        self._writer = secured.raw.writer

    # -- sending ------------------------------------------------------------------------
    def send_frame(self, typ: int, flags: int, sid: int, length: int) -> None:
        """Queue one frame without payload (window update, ping, go-away) for stream `sid`;
        nothing once the session has closed."""
        if self.closed.is_set():
            return
        self.secured.write_nowait(_HEADER.pack(0, typ, flags, sid, length))

    def send_data(self, sid: int, payload: memoryview, flags: int = 0) -> None:
        """Queue one DATA frame for stream `sid`; StreamReset once the session has closed."""
        if self.closed.is_set():
            raise StreamReset(self.close_reason or "connection closed")
        self.secured.write_nowait(_HEADER.pack(0, TYPE_DATA, flags, sid, len(payload))
                                  + payload)

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            raise StreamReset("connection lost: %s" % e) from None

    def _check_write_buffer(self) -> None:
        """A peer that makes us answer (pings, window updates) but never reads."""
        t = self._writer.transport
        if t is not None and t.get_write_buffer_size() > self.config.max_write_buffer_bytes:
            raise ProtocolError("peer does not read: %d bytes queued"
                                % t.get_write_buffer_size())

    # -- streams -------------------------------------------------------------------------
    @property
    def stream_count(self) -> int:
        return len(self._streams)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received on all open streams and not yet read by their handlers."""
        return sum(st.buffered for st in self._streams.values())

    def forget(self, stream: Stream) -> None:
        """Drop a stream that is finished (closed both ways, or reset) from the session."""
        if self._streams.get(stream.stream_id) is stream:
            del self._streams[stream.stream_id]

    def open_stream(self) -> Stream:
        """Open an outbound stream (SYN goes out with the first frame, right away)."""
        if self.closed.is_set():
            raise StreamReset(self.close_reason or "connection closed")
        if self.remote_goaway:
            raise MeshError("remote sent go-away: no new streams")
        if len(self._streams) >= self.config.max_streams:
            raise MeshError("stream limit of %d reached" % self.config.max_streams)
        sid = self._next_id
        if sid > 0xFFFFFFFF:
            raise MeshError("stream ids exhausted")
        self._next_id += 2
        extra = self.config.window_bytes - INITIAL_WINDOW
        st = Stream(self, sid, True, self.config.window_bytes)
        self._streams[sid] = st
        self.send_frame(TYPE_WINDOW_UPDATE, FLAG_SYN, sid, extra)
        return st

    def set_stream_handler(self, on_stream: Callable[[Stream], None]) -> None:
        """Hand inbound streams to `on_stream` from now on: for an owner that can only
        build its handler once the session exists (the connection wrapping it)."""
        self._on_stream = on_stream

    # -- ping ----------------------------------------------------------------------------
    async def ping(self, timeout_s: float = 10.0) -> float:
        """Round trip of one Yamux ping, in seconds."""
        if len(self._pings) >= self.config.max_pending_pings:
            raise MeshError("too many pings in flight")
        self._ping_seq = (self._ping_seq + 1) & 0xFFFFFFFF
        value = self._ping_seq
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pings[value] = fut
        self._ping_sent[value] = time.perf_counter()
        self.send_frame(TYPE_PING, FLAG_SYN, 0, value)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pings.pop(value, None)
            self._ping_sent.pop(value, None)

    # -- reading -------------------------------------------------------------------------
    async def run(self) -> None:
        """Read and dispatch frames until EOF, a protocol error or close()."""
        reason = "connection closed by remote"
        error = False
        try:
            await self._read_loop()
        except ProtocolError as e:
            reason, error = "protocol error: %s" % e, True
            with contextlib.suppress(Exception):
                self.secured.write_nowait(_HEADER.pack(0, TYPE_GO_AWAY, 0, 0,
                                                       GO_AWAY_PROTOCOL_ERROR))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            if not self.closed.is_set():
                reason = "connection lost: %s" % (e.__class__.__name__,)
        except asyncio.CancelledError:
            reason = "cancelled"
            self._shutdown(reason, abort=True)
            raise
        if error:
            log.warning("mesh: closing connection to %s: %s", self.name, reason)
        else:
            log.debug("mesh: connection to %s ended: %s", self.name, reason)
        self._shutdown(reason, abort=error)

    async def _read_loop(self) -> None:
        read_some = self.secured.read_some
        unpack = _HEADER.unpack_from
        max_frame = self.config.window_bytes
        pending = b""
        while not self.closed.is_set():
            data = await read_some()
            buf = pending + data if pending else data
            end = len(buf)
            pos = 0
            while end - pos >= _HEADER_SIZE:
                ver, typ, flags, sid, length = unpack(buf, pos)
                if ver != 0:
                    raise ProtocolError("yamux version %d" % ver)
                if typ == TYPE_DATA:
                    if length > max_frame:
                        # Never buffer toward a frame no window could allow.
                        raise ProtocolError("data frame of %d bytes exceeds any window"
                                            % length)
                    if end - pos - _HEADER_SIZE < length:
                        break
                    start = pos + _HEADER_SIZE
                    payload = buf[start:start + length] if length else b""
                    pos = start + length
                    self._on_stream_frame(typ, flags, sid, length, payload)
                else:
                    pos += _HEADER_SIZE
                    if typ == TYPE_WINDOW_UPDATE:
                        self._on_stream_frame(typ, flags, sid, length, b"")
                    elif typ == TYPE_PING:
                        self._on_ping(flags, length)
                    elif typ == TYPE_GO_AWAY:
                        self._on_go_away(length)
                    else:
                        raise ProtocolError("unknown frame type %d" % typ)
            pending = buf[pos:] if pos < end else b""

    def _on_stream_frame(self, typ: int, flags: int, sid: int, length: int,
                         payload: bytes) -> None:
        if sid == 0:
            raise ProtocolError("stream frame on stream id 0")
        st = self._streams.get(sid)
        if flags & FLAG_SYN:
            if st is not None:
                raise ProtocolError("SYN for stream %d already open" % sid)
            if (sid & 1) == (1 if self.is_client else 0):
                raise ProtocolError("remote opened stream %d of our parity" % sid)
            if self.closed.is_set():
                return
            if len(self._streams) >= self.config.max_streams:
                self.refused_streams += 1
                if self.refused_streams > self.config.max_refused_streams:
                    raise ProtocolError("stream flood: %d streams refused over the limit "
                                        "of %d" % (self.refused_streams,
                                                   self.config.max_streams))
                self.send_frame(TYPE_WINDOW_UPDATE, FLAG_RST, sid, 0)
                self._check_write_buffer()
                return
            extra = self.config.window_bytes - INITIAL_WINDOW
            st = Stream(self, sid, False, self.config.window_bytes)
            self._streams[sid] = st
            self.send_frame(TYPE_WINDOW_UPDATE, FLAG_ACK, sid, extra)
            self._check_write_buffer()
            self._on_stream(st)
        elif st is None:
            # A frame for a stream we reset or finished: legal in flight, dropped.
            self.dropped_frames += 1
            return
        if typ == TYPE_DATA:
            st.on_data(payload)
        elif length:
            st.on_window_update(length)
        if flags & FLAG_RST:
            st.on_reset("reset by remote")
            self.forget(st)
        elif flags & FLAG_FIN:
            st.on_fin()

    def _on_ping(self, flags: int, value: int) -> None:
        if flags & FLAG_SYN:
            self.send_frame(TYPE_PING, FLAG_ACK, 0, value)
            self._check_write_buffer()
        elif flags & FLAG_ACK:
            fut = self._pings.get(value)
            sent = self._ping_sent.get(value)
            if fut is not None and sent is not None and not fut.done():
                fut.set_result(time.perf_counter() - sent)

    def _on_go_away(self, code: int) -> None:
        self.remote_goaway = True
        if code == GO_AWAY_NORMAL:
            log.debug("mesh: %s sent go-away", self.name)
        else:
            log.info("mesh: %s sent go-away with error code %d", self.name, code)

    # -- closing ------------------------------------------------------------------------
    def _shutdown(self, reason: str, *, abort: bool = False) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        for st in list(self._streams.values()):
            st.on_reset(reason)
        self._streams.clear()
        for fut in self._pings.values():
            if not fut.done():
                fut.set_exception(MeshError(reason))
        if abort:
            self.secured.abort()
        else:
            self.secured.close()

    async def close(self, reason: str = "closed locally") -> None:
        """Send go-away, close the connection, reset what is still open."""
        if not self.closed.is_set():
            with contextlib.suppress(Exception):
                self.secured.write_nowait(_HEADER.pack(0, TYPE_GO_AWAY, 0, 0, GO_AWAY_NORMAL))
            self._shutdown(reason)
        await self.secured.raw.wait_closed()
