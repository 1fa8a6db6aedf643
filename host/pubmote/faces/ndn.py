"""The NFD-compatible face: NDN applications (python-ndn, ndn-python-repo) connect here as
they would to NFD, over TCP or a unix socket, and speak bare TLV packets and NDNLPv2.
The management commands the apps send through it (rib/register) are answered by the hub
(core/nfd_mgmt.py). Apps have no authentication: a face bound beyond loopback needs its
allow-lists (the sources that may connect, the prefixes apps may publish and register
under: core/allowlist.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pubmote.core.addresses import AddressError, log_exposure, parse_tcp_url
from pubmote.core.admission import Admission, source_of
from pubmote.core.allowlist import AllowList
from pubmote.core.allowlist import exposed_problem as _exposed
from pubmote.core.limits import LimitHits, Limits
from pubmote.faces import unixpath
from pubmote_wire import name as ndn_name
from pubmote_wire import tlv
from pubmote_wire.errors import DecodeError

log = logging.getLogger("pubmote.ndn")

MAX_PACKET = 8800  # NDN's maximum packet size
OUT_LIMIT_BYTES = 1 << 20

PacketHandler = Callable[[Any, bytes], None]
FaceHandler = Callable[[Any], None]


def exposed_problem(url: str, sources: list[str], prefixes: list[str]) -> str | None:
    """Why the NDN face at url may not be bound with these allow-lists (None if it may):
    beyond loopback it needs both ndn_allow_from and ndn_allow_prefixes."""
    if not url.startswith("tcp://"):
        return None  # a unix socket (this host only), or a URL its own check refuses
    try:
        host, _ = parse_tcp_url(url)
    except AddressError:
        return None
    return _exposed("the NDN face", url, host, sources, prefixes,
                    ("ndn_allow_from", "ndn_allow_prefixes"),
                    "name prefixes apps may publish and register under, e.g. /myapp")


class StreamDecoder:
    """Splits a byte stream into whole TLV elements; a claimed length above max_packet is
    a DecodeError at once (the connection is then closed), never a big allocation."""

    def __init__(self, max_packet: int = MAX_PACKET) -> None:
        self.buf = bytearray()
        self.max_packet = max_packet

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buf += chunk
        out = []
        while self.buf:
            b = self.buf
            try:
                _, n1 = tlv.read_varnum(b, 0)
                length, n2 = tlv.read_varnum(b, n1)
            except DecodeError:
                if len(b) >= 18:  # long enough for any T and L: not a partial header
                    raise
                break
            total = n1 + n2 + length
            if total > self.max_packet:
                raise DecodeError("packet of %d bytes exceeds %d" % (total, self.max_packet))
            if len(b) < total:
                break
            out.append(bytes(b[:total]))
            del b[:total]
        return out


class NdnAppFace(asyncio.Protocol):
    """One connected NDN application."""

    kind = "ndn"

    def __init__(self, face_id: int, on_packet: PacketHandler, on_state: FaceHandler,
                 admission: Admission | None = None, allow: AllowList | None = None) -> None:
        self.face_id = face_id
        # the listener's allow-lists; the hub asks name_allowed for notifies and registers
        self.allow = allow if allow is not None else AllowList()
        self.label = "ndn:%d" % face_id
        self.on_packet = on_packet
        self.on_state = on_state
        self.up = False
        self.board: str | None = None
        self.decoder = StreamDecoder()
        self.tracer: Any = None
        self._t: asyncio.Transport | None = None
        self._admission = admission
        self._source: str | None = None
        self._admitted = False
        self._refused = False
        self.counters = {"rx_packets": 0, "tx_packets": 0, "tx_dropped": 0, "bad_streams": 0,
                         "opens": 1, "rx_errors": 0}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        if not self.allow.source_ok(peer):
            self.allow.say(log, self.allow.refused_source, "NDN face: closed a connection "
                           "from %s, outside ndn_allow_from", peer[0])
            self._refused = True
            transport.abort()  # type: ignore[attr-defined]
            return
        if self._admission is not None:
            self._source = source_of(transport.get_extra_info("peername"))
            if not self._admission.admit(self._source):
                transport.abort()  # type: ignore[attr-defined]
                return
            self._admitted = True
        self._t = transport  # type: ignore[assignment]
        self.up = True
        self.on_state(self)

    def data_received(self, data: bytes) -> None:
        try:
            pkts = self.decoder.feed(data)
        except DecodeError as e:
            self.counters["bad_streams"] += 1
            log.info("%s sent a malformed stream (%s); closing it", self.label, e)
            if self._t is not None:
                self._t.close()
            return
        try:
            for pkt in pkts:
                self.counters["rx_packets"] += 1
                self.on_packet(self, pkt)
        except Exception:  # nothing an app sends may end the bridge
            self.counters["rx_errors"] += 1
            log.exception("%s: handling a packet failed; closing it", self.label)
            if self._t is not None:
                self._t.close()

    def name_allowed(self, name: bytes, what: str) -> bool:
        """Whether this app may publish or register under name (an NDN name); a refusal
        is counted and logged."""
        if self.allow.name_ok(name):
            return True
        self.allow.say(log, self.allow.refused_name, "%s: refused %s %s, outside "
                       "ndn_allow_prefixes", self.label, what, ndn_name.to_uri(name))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        if not self._admitted and self._admission is not None:
            return  # refused: it never came up
        if self._admitted and self._admission is not None:
            self._admission.release(self._source)
            self._admitted = False
        self._t = None
        self.up = False
        self.on_state(self)

    def send_packet(self, pkt: bytes) -> None:
        t = self._t
        if t is None or t.get_write_buffer_size() + len(pkt) > OUT_LIMIT_BYTES:
            self.counters["tx_dropped"] += 1
            return
        if self.tracer is not None:
            self.tracer.record(self.label, "out", pkt)
        t.write(pkt)
        self.counters["tx_packets"] += 1

    def bad_frames(self) -> int:
        return self.counters["bad_streams"]

    def close(self) -> None:
        if self._t is not None:
            self._t.close()


class NdnFaceServer:
    """A listener (`tcp://HOST:PORT` or `unix:///PATH`) making an NdnAppFace per app: at
    most ndn_max_apps, ndn_max_apps_per_ip from one address (one app cannot exhaust the
    bridge)."""

    def __init__(self, url: str, new_face_id: Callable[[], int], on_packet: PacketHandler,
                 on_state: FaceHandler, *, limits: Limits | None = None,
                 hits: LimitHits | None = None, allow: AllowList | None = None) -> None:
        lim = limits if limits is not None else Limits()
        self.url = url
        self.allow = allow if allow is not None else AllowList()
        self.new_face_id = new_face_id
        self.on_packet = on_packet
        self.on_state = on_state
        self.admission = Admission("--ndn-face %s" % url, max_total=lim.ndn_max_apps,
                                   max_per_ip=lim.ndn_max_apps_per_ip,
                                   hits=hits if hits is not None else LimitHits(),
                                   total_key="ndn_max_apps", per_ip_key="ndn_max_apps_per_ip")
        self.faces: dict[int, NdnAppFace] = {}
        self.bad_streams = 0  # malformed streams of apps since gone
        self.rx_errors = 0  # packets of apps since gone that our code failed on
        self.server: asyncio.AbstractServer | None = None
        self._path: str | None = None  # our unix socket file, removed at close
        self._ident: tuple[int, int] | None = None

    def _factory(self) -> asyncio.Protocol:
        return NdnAppFace(self.new_face_id(), self.on_packet, self._state, self.admission,
                          self.allow)

    def _state(self, face: NdnAppFace) -> None:
        if face.up:
            self.faces[face.face_id] = face
        else:
            self.faces.pop(face.face_id, None)
            self.bad_streams += face.counters["bad_streams"]
            self.rx_errors += face.counters["rx_errors"]
        self.on_state(face)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.url.startswith("unix://"):
            path = self.url[len("unix://"):]
            try:
                unixpath.prepare(path)
            except unixpath.SocketPathError as e:
                raise ValueError("--ndn-face %s: %s" % (self.url, e)) from None
            self.server = await loop.create_unix_server(self._factory, path)
            self._path, self._ident = path, unixpath.identity(path)
        elif self.url.startswith("tcp://"):
            try:
                host, port = parse_tcp_url(self.url)
            except AddressError as e:
                raise ValueError("--ndn-face %s: %s" % (self.url, e)) from None
            why = exposed_problem(self.url, [str(n) for n in self.allow.nets],
                                  [ndn_name.to_uri(p) for p in self.allow.prefixes])
            if why:
                raise ValueError(why)
            log_exposure(log, "the NDN face", self.url, host,
                         "NDN apps there are not authenticated; only %s may connect, and "
                         "publish and register only under %s" % (
                             ", ".join(str(n) for n in self.allow.nets),
                             ", ".join(ndn_name.to_uri(p) for p in self.allow.prefixes)))
            self.server = await loop.create_server(self._factory, host, port,
                                                   reuse_address=True)
        else:
            raise ValueError("--ndn-face needs tcp://HOST:PORT or unix:///PATH, not %r"
                             % self.url)

    async def close(self) -> None:
        for f in list(self.faces.values()):
            f.close()
        if self.server is not None:
            self.server.close()
        if self._path is not None:
            unixpath.remove(self._path, self._ident)
            self._path = None
