"""Boards on TCP connections (WiFi boards dialling the bridge's --tcp face): the listener,
within its connection caps, and a face per connection."""

from __future__ import annotations

import asyncio
import logging

from pubmote.core.admission import Admission, source_of
from pubmote.core.limits import LimitHits, Limits
from pubmote.faces.board import OUT_LIMIT_BYTES, BoardFace, FaceHandler, PacketHandler
from pubmote.faces.tls import BoardPort, LinkGuard
from pubmote.faces.watch import FaceWatch

log = logging.getLogger("pubmote.faces")


class StreamFace(BoardFace, asyncio.Protocol):
    """A board connected over TCP to the bridge's --tcp face: one face per connection.
    With an admission, a connection beyond its caps is closed at once; with a watch, one
    that never registers a board or goes quiet is closed later."""

    kind = "tcp"

    def __init__(self, on_packet: PacketHandler, on_state: FaceHandler, *,
                 admission: Admission | None = None, watch: FaceWatch | None = None) -> None:
        super().__init__("tcp:?", on_packet, on_state)
        self._transport: asyncio.Transport | None = None
        self._admission = admission
        self._watch = watch
        self._source: str | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        if self._admission is not None:
            self._source = source_of(peer)
            if not self._admission.admit(self._source):
                transport.abort()
                return
            self._admitted = True
        self._transport = transport
        self.label = "tcp:%s:%s" % (peer[0], peer[1]) if peer else "tcp:?"
        transport.set_write_buffer_limits(high=OUT_LIMIT_BYTES)
        self.counters["opens"] += 1
        if self._watch is not None:
            self._watch.watch(self)
        self.set_up(True)

    def data_received(self, data: bytes) -> None:
        if not self.feed(data) and self._transport is not None:
            self._transport.close()  # counted in rx_errors; the board dials again

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted and self._admission is not None:
            self._admission.release(self._source)
            self._admitted = False
        if self._watch is not None:
            self._watch.forget(self)
        self._transport = None
        self.set_up(False)

    def _write_raw(self, frame: bytes) -> bool:
        t = self._transport
        if t is None or t.get_write_buffer_size() + len(frame) > OUT_LIMIT_BYTES:
            return False
        t.write(frame)
        return True

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        super().close()


class StreamListener:
    """One --tcp listener: at most tcp_max_conns board connections, tcp_max_conns_per_ip
    from one address; faces that never register or go quiet are closed (FaceWatch)."""

    def __init__(self, host: str, port: int, on_packet: PacketHandler, on_state: FaceHandler,
                 *, limits: Limits | None = None, hits: LimitHits | None = None,
                 guard: LinkGuard | None = None) -> None:
        lim = limits if limits is not None else Limits()
        hits = hits if hits is not None else LimitHits()
        self.host, self.port = host, port
        self.on_packet = on_packet
        self.on_state = on_state
        self.admission = Admission("--tcp %s:%d" % (host, port), max_total=lim.tcp_max_conns,
                                   max_per_ip=lim.tcp_max_conns_per_ip, hits=hits,
                                   total_key="tcp_max_conns", per_ip_key="tcp_max_conns_per_ip")
        self.watch = FaceWatch(register_timeout_s=lim.board_register_timeout_s,
                               idle_timeout_s=lim.board_idle_timeout_s, hits=hits)
        self.guard = guard  # TLS (faces/tls.py): the connection's first byte decides
        self.server: asyncio.AbstractServer | None = None

    def _face(self, admission: Admission | None) -> StreamFace:
        return StreamFace(self.on_packet, self.on_state, admission=admission,
                          watch=self.watch)

    def _protocol(self) -> asyncio.Protocol:
        if self.guard is None:
            return self._face(self.admission)
        # with TLS the port admits the connection (its handshake counts) and hands the
        # decrypted stream to a face that admits nothing again
        return BoardPort(self.guard, lambda: self._face(None), admission=self.admission)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(self._protocol, self.host, self.port,
                                               reuse_address=True)
        self.watch.start()

    async def close(self) -> None:
        await self.watch.close()
        if self.server is not None:
            self.server.close()
