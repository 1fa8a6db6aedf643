"""The pub/sub hub: boards register their filters, publish with seed 000 (the hub fetches
and acks) and receive with seed 000 (the hub publishes, the board fetches and acks).

Every message that reaches the hub fans out to every listener (SP PUB clients, the
journal, the view) and to every board whose seed-001 filters match `<topic URI>|<payload>`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from pubmote.core import nfd_mgmt
from pubmote.core.auth import BoardAuth, board_of
from pubmote.core.forwarder import Face, Forwarder
from pubmote.core.journal import Journal
from pubmote_wire import cbor, lp, notify, sp
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.errors import DecodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.signature import DigestSigner

log = logging.getLogger("pubmote.hub")

REGISTER = ndn_name.from_uri("/pubmote/ctl/register")
HELLO = ndn_name.from_uri("/pubmote/ctl/hello")
MSG = ndn_name.generic(b"msg")
NOTIFY_COMPONENT = ndn_name.generic(b"notify")
SIGNER = DigestSigner()
# room for everything but the names and payload in a notify/msg packet: TLV headers,
# notify and msg components, params digest, nonces, lifetime, signature info and value
_OVERHEAD = 256


class Message:
    """One relayed message. `topic` is the topic's URI as bytes."""

    __slots__ = ("topic", "payload", "origin", "ingress", "t_recv", "t_board")

    def __init__(self, topic: bytes, payload: bytes, origin: str, ingress: str,
                 t_board: int | None = None) -> None:
        self.topic = topic
        self.payload = payload
        self.origin = origin
        self.ingress = ingress
        self.t_recv = time.time()
        self.t_board = t_board  # the board's SignatureTime (ms), when it signs

    def line(self) -> bytes:
        """The SP form: `<topic URI>|<payload>`, what seed-001 filters match against."""
        return self.topic + b"|" + self.payload


Listener = Callable[[Message], None]


class HubFace(Protocol):
    """What the hub needs of any face: board links and NDN application connections."""

    face_id: int
    label: str
    kind: str
    up: bool
    board: str | None
    tracer: Any

    def send_packet(self, pkt: bytes) -> None: ...

    def bad_frames(self) -> int: ...


class BoardState:
    """What the hub knows of one board, keyed by the name it registered with."""

    def __init__(self, name: str, prefix: bytes, face: HubFace, queue_len: int) -> None:
        self.name = name
        self.prefix = prefix
        self.face = face
        self.filter = sp.SubFilter()
        self.filters: list[bytes] = []
        self.registered_at = time.time()
        self.last_seen = time.time()
        self.registrations = 0
        self.down = False  # its face went down; its next registration is a reconnect
        self.outbox: deque[Message] = deque()
        self.queue_len = queue_len
        self.wake = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        self.last: dict[bytes, bytes] = {}
        self.counters = {"published": 0, "delivered": 0, "dropped": 0, "fetch_failed": 0,
                         "deliver_failed": 0, "duplicates": 0}

    def set_filters(self, filters: list[bytes]) -> None:
        f = sp.SubFilter()
        for p in filters:
            f.subscribe(p)
        self.filter = f
        self.filters = list(filters)

    def enqueue(self, msg: Message) -> Message | None:
        """Queue msg for delivery; return the message dropped to make room, if any."""
        dropped = None
        if len(self.outbox) >= self.queue_len:
            dropped = self.outbox.popleft()
            self.counters["dropped"] += 1
        self.outbox.append(msg)
        self.wake.set()
        return dropped


class TopicStats:
    __slots__ = ("count", "last_payload", "last_origin", "last_time", "rate", "_t0", "_n0")

    def __init__(self) -> None:
        self.count = 0
        self.last_payload = b""
        self.last_origin = ""
        self.last_time = 0.0
        self.rate = 0.0
        self._t0 = time.monotonic()
        self._n0 = 0

    def add(self, msg: Message) -> None:
        self.count += 1
        self.last_payload = msg.payload
        self.last_origin = msg.origin
        self.last_time = msg.t_recv
        now = time.monotonic()
        if now - self._t0 >= 2.0:
            self.rate = (self.count - self._n0) / (now - self._t0)
            self._t0, self._n0 = now, self.count


class Hub:
    """The bridge's pub/sub core; faces hand it packets through `on_packet`."""

    def __init__(self, *, gateway: str = "gw", timeout_ms: int = 2000, retries: int = 3,
                 board_queue_len: int = 64, window: int = 4, max_boards: int = 256) -> None:
        self.gateway = gateway
        self.prefix = ndn_name.from_uri("/pubmote/gw/%s" % gateway)
        self.fwd = Forwarder()
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.board_queue_len = board_queue_len
        self.window = window
        self.max_boards = max_boards
        self.boards: dict[str, BoardState] = {}
        self.app_subs: dict[int, BoardState] = {}  # NDN apps' PubSub subscriptions, by face
        self.faces: dict[int, HubFace] = {}
        self.tracer: Any = None
        self.auth: BoardAuth | None = None
        self.journal: Journal | None = None
        self.topics: dict[bytes, TopicStats] = {}
        self.listeners: list[Listener] = []
        # called with each board as it (re)registers: retained topics hand it last values
        self.register_hooks: list[Callable[[BoardState], None]] = []
        # see every message before fan-out; a hook returning True has taken it over
        # (directed messages, seed 003: gateway_mesh.py routes them itself)
        self.publish_hooks: list[Callable[[Message], bool]] = []
        self._done: OrderedDict[bytes, bool] = OrderedDict()  # publisher+nonce fetched
        self._inflight: set[bytes] = set()
        self._serve: dict[bytes, bytes] = {}  # our NotifyNonce -> msg Data, until acked
        self._tasks: set[asyncio.Task[Any]] = set()
        self.counters = {"messages": 0, "bad_packets": 0, "nacks_sent": 0, "nacks_recv": 0,
                         "unknown_board_refused": 0, "fetch_failed": 0, "rib_commands": 0,
                         "rib_refused": 0, "localhost_dropped": 0, "inline": 0,
                         "inline_refused": 0}

    # ---- faces ---------------------------------------------------------------------

    def face_state(self, face: HubFace) -> None:
        if face.up:
            self.faces[face.face_id] = face
            face.tracer = self.tracer
            if face.kind != "ndn":
                # a board that was on this line before the bridge (re)started hears a hello
                # and re-registers at once instead of waiting for its keepalive
                face.send_packet(ndn_interest.encode(HELLO + ndn_name.generic(os.urandom(4)),
                                                     nonce=_nonce(), lifetime_ms=1000))
        else:
            self.faces.pop(face.face_id, None)
            self.fwd.remove_face(face)
            b = self.boards.get(face.board or "")
            if b is not None and b.face is face and not b.down:
                b.down = True
                self._journal_event("board_down", b.name, face.label)
            sub = self.app_subs.pop(face.face_id, None)
            if sub is not None and sub.worker is not None:
                sub.worker.cancel()

    def on_packet(self, face: HubFace, pkt: bytes) -> None:
        if self.tracer is not None:
            self.tracer.record(face.label, "in", pkt)
        try:
            typ = pkt[0]
            if typ == 0x05:
                self._on_interest(face, pkt)
            elif typ == 0x06:
                d = ndn_data.decode_data(pkt)
                self.fwd.satisfy(bytes(d.name), pkt, face)
            elif typ == 0x64:
                self._on_lp(face, pkt)
            else:
                raise DecodeError("not an NDN packet (type %d)" % typ)
        except DecodeError as e:
            self.counters["bad_packets"] += 1
            log.debug("bad packet from %s: %s", face.label, e)

    def _on_lp(self, face: HubFace, pkt: bytes) -> None:
        p = lp.decode_lp(pkt)
        if p.fragment is None:
            return
        inner = bytes(p.fragment)
        if inner[:1] == b"\x64":
            raise DecodeError("LpPacket inside an LpPacket")  # no recursion on nesting
        if p.nack_reason is not None:
            self.counters["nacks_recv"] += 1
            i = ndn_interest.decode_interest(inner)
            entry = self.fwd.nack(bytes(i.name), p.nack_reason)
            if entry is not None:  # pass the Nack on to whoever asked, with its reason
                buf = bytearray(len(inner) + 32)
                n = lp.encode_nack(buf, 0, inner, p.nack_reason)
                for f in entry.in_faces.values():
                    if f.face_id != face.face_id:
                        f.send_packet(bytes(buf[:n]))
            return
        if inner[:1] == b"\x05":
            self._on_interest(face, inner)
        elif inner[:1] == b"\x06":
            d = ndn_data.decode_data(inner)
            self.fwd.satisfy(bytes(d.name), inner, face)
        else:
            raise DecodeError("LpPacket fragment is not an Interest or Data")

    def _on_interest(self, face: HubFace, pkt: bytes) -> None:
        i = ndn_interest.decode_interest(pkt)
        nm = bytes(i.name)
        if nm.startswith(nfd_mgmt.LOCALHOST):
            # /localhost never leaves this host: management from local apps, else dropped
            if face.kind == "ndn" and (nm.startswith(nfd_mgmt.RIB_REGISTER)
                                       or nm.startswith(nfd_mgmt.RIB_UNREGISTER)):
                self._on_rib_command(face, nm)
            else:
                self.counters["localhost_dropped"] += 1
            return
        if nm.startswith(REGISTER):
            self._on_register(face, i, nm, pkt)
            return
        plen = len(self.prefix)
        if nm.startswith(self.prefix) and nm[plen:plen + len(MSG)] == MSG:
            comps = ndn_name.components(nm)
            nonce = bytes(ndn_name.component_type_value(comps[-1])[1])
            served = self._serve.get(nonce)
            if served is not None:
                face.send_packet(served)
            else:
                self._send_nack(face, pkt)
            return
        try:
            topic, publisher, nonce, fwd, ni = notify.notify_parts(i, pkt)
        except DecodeError:
            topic = None
        if topic is not None:
            if (self.auth is not None and face.kind != "ndn"
                    and self.auth.requires(bytes(topic))
                    and self.auth.check_interest(board_of(bytes(publisher)), ni, pkt)):
                return  # rejected (counted and logged by the policy)
            inline = notify.inline_msg(ni)
            self._spawn(self._on_notify(face, nm, bytes(topic), bytes(publisher), bytes(nonce),
                                        bytes(fwd) if fwd is not None else None,
                                        ni.sig_time_ms,
                                        bytes(inline) if inline is not None else None))
            return
        # anything else is forwarded along the FIB (an app or board serving that prefix)
        hops = [h for h in self.fwd.lookup(nm) if h.face_id != face.face_id]
        if not hops:
            self.fwd.counters["no_route"] += 1
            self._send_nack(face, pkt)
            return
        if self.fwd.add_pending(nm, i.nonce, i.lifetime_ms or 4000, face=face):
            for h in hops:
                h.send_packet(pkt)

    def _on_rib_command(self, face: HubFace, nm: bytes) -> None:
        """NFD's rib/register and rib/unregister for a local NDN application."""
        self.counters["rib_commands"] += 1
        register = nm.startswith(nfd_mgmt.RIB_REGISTER)
        try:
            params = nfd_mgmt.command_parameters(nm)
        except DecodeError as e:
            self.counters["rib_refused"] += 1
            self._reply(face, nm, nfd_mgmt.control_response(400, "malformed command: %s" % e,
                                                            None))
            return
        prefix = params["name"]
        params["face_id"] = face.face_id
        if register:
            try:
                self.fwd.add_route(prefix, face)
            except ValueError as e:
                self.counters["rib_refused"] += 1
                self._reply(face, nm, nfd_mgmt.control_response(403, str(e), None))
                return
        else:
            self.fwd.remove_route(prefix, face)
        topic = _notify_topic(prefix)
        if topic is not None:
            self._app_subscription(face, topic, register)
        self._reply(face, nm, nfd_mgmt.control_response(200, "OK", params))

    def _app_subscription(self, face: HubFace, topic: bytes, add: bool) -> None:
        # a PubSub subscriber registers /<topic>/notify: the hub delivers that topic to it
        # as to a board whose filter is exactly `<topic URI>|`
        line = ndn_name.to_uri(topic).encode() + b"|"
        sub = self.app_subs.get(face.face_id)
        if sub is None:
            if not add:
                return
            sub = BoardState("app%d" % face.face_id, b"", face, self.board_queue_len)
            self.app_subs[face.face_id] = sub
            sub.worker = self._spawn(self._deliver_loop(sub))
        filters = [f for f in sub.filters if f != line]
        if add:
            filters.append(line)
        sub.set_filters(filters)

    def _reply(self, face: HubFace, nm: bytes, content: bytes) -> None:
        face.send_packet(ndn_data.encode(nm, content, freshness_ms=0, signer=SIGNER))

    def _send_nack(self, face: HubFace, pkt: bytes) -> None:
        buf = bytearray(len(pkt) + 32)
        n = lp.encode_nack(buf, 0, pkt, lp.NACK_NO_ROUTE)
        face.send_packet(bytes(buf[:n]))
        self.counters["nacks_sent"] += 1

    def _on_register(self, face: HubFace, i: ndn_interest.Interest, nm: bytes,
                     pkt: bytes) -> None:
        try:
            info = cbor.loads(bytes(i.app_params or b""))
            bname = str(info["name"])
            prefix = ndn_name.from_uri(str(info["prefix"]))
            filters = [bytes(f) for f in info.get("filters", [])]
            serves = [ndn_name.from_uri(str(x)) for x in info.get("serve", [])][:8]
        except (DecodeError, KeyError, TypeError, ValueError) as e:
            self.counters["bad_packets"] += 1
            log.warning("bad registration from %s: %s", face.label, e)
            self._send_nack(face, ndn_interest.encode(nm, nonce=_nonce()))
            return
        key = self.auth.keys.get(bname) if self.auth is not None else None
        if key is not None and self.auth is not None and self.auth.check_interest(
                bname, i, pkt, what="registration", check_time=False):
            # a board with a key registers only with it: nobody else takes its name
            self.auth.rejected["register_rejected"] += 1
            return
        b = self.boards.get(bname)
        if b is None:
            if len(self.boards) >= self.max_boards:
                self.counters["unknown_board_refused"] += 1
                return
            b = BoardState(bname, prefix, face, self.board_queue_len)
            self.boards[bname] = b
            log.info("board %s registered on %s", bname, face.label)
            self._journal_event("board_up", bname, face.label, reconnect=False)
        elif b.face is not face or b.prefix != prefix or b.down:
            self.fwd.remove_route(b.prefix, b.face)
            log.info("board %s moved to %s", bname, face.label)
            self._journal_event("board_up", bname, face.label, reconnect=True)
        b.down = False
        b.face, b.prefix = face, prefix
        face.board = bname
        if filters != b.filters:
            b.set_filters(filters)
        b.registrations += 1
        b.last_seen = time.time()
        self.fwd.add_route(prefix, face)
        for served in serves:  # named data the board answers (python-ndn express_interest)
            self.fwd.add_route(served, face)
        if b.worker is None or b.worker.done():
            b.worker = self._spawn(self._deliver_loop(b))
        for hook in self.register_hooks:
            hook(b)
        b.wake.set()
        # the gateway's clock, for boards without one: their signed Interests carry
        # SignatureTime; signed with the board's key so the board can trust it
        info_out = {"gateway": ndn_name.to_uri(self.prefix), "time_ms": int(time.time() * 1000)}
        reply = ndn_data.encode(nm, cbor.dumps(info_out), freshness_ms=0,
                                signer=HmacSigner(key) if key is not None else SIGNER)
        face.send_packet(reply)

    # ---- board -> hub: seed 000 with the hub as the subscriber ----------------------

    async def _on_notify(self, face: HubFace, notify_name: bytes, topic: bytes,
                         publisher: bytes, nonce: bytes, fwd: bytes | None = None,
                         t_board: int | None = None, inline: bytes | None = None) -> None:
        key = publisher + b"\x00" + nonce
        if key in self._done:
            self._count_board(face, "duplicates")
            self._ack(face, notify_name)
            return
        if key in self._inflight:
            return  # a retransmitted notify; the ack of the first answers both (same name)
        self._inflight.add(key)
        try:
            d = self._inline_msg(inline, publisher, topic, nonce)
            reply = inline if d is not None else await self._fetch(face, publisher, topic,
                                                                   nonce, fwd)
            if reply is None:
                self.counters["fetch_failed"] += 1
                self._count_board(face, "fetch_failed")
                self._journal_event("fetch_failed", face.board or ndn_name.to_uri(publisher),
                                    face.label, topic=ndn_name.to_uri(topic))
                return
            if (self.auth is not None and face.kind != "ndn" and self.auth.requires(topic)
                    and self.auth.check_data(board_of(publisher), reply)):
                return
            if d is None:
                d = ndn_data.decode_data(reply)
            payload = bytes(d.content) if d.content is not None else b""
            self._done[key] = True
            while len(self._done) > 4096:
                self._done.popitem(last=False)
            origin = face.board or ndn_name.to_uri(publisher)
            msg = Message(ndn_name.to_uri(topic).encode(), payload, origin, face.label, t_board)
            self._count_board(face, "published")
            b = self.boards.get(face.board or "")
            if b is not None:
                b.last[msg.topic] = payload
                b.last_seen = time.time()
            self.publish(msg)
            # ack only after the message is handed to every subscriber: an acked message
            # is never lost by a crash of the board
            self._ack(face, notify_name)
        finally:
            self._inflight.discard(key)

    def _inline_msg(self, inline: bytes | None, publisher: bytes, topic: bytes,
                    nonce: bytes) -> ndn_data.Data | None:
        """The message Data a notify carried inline, decoded, if it is the one the notify
        announces (else None: it is fetched, as by any subscriber that ignores INLINE_MSG)."""
        if inline is None:
            return None
        try:
            d = ndn_data.decode_data(inline)
        except DecodeError:
            d = None
        if d is None or bytes(d.name) != notify.msg_name(publisher, topic, nonce):
            self.counters["inline_refused"] += 1
            return None
        self.counters["inline"] += 1
        return d

    def _count_board(self, face: HubFace, key: str) -> None:
        b = self.boards.get(face.board or "")
        if b is not None:
            b.counters[key] += 1

    async def _fetch(self, face: HubFace, publisher: bytes, topic: bytes, nonce: bytes,
                     fwd: bytes | None = None) -> bytes | None:
        # route by the message's name, else by the publisher's forwarding hint (seed 000's
        # PublisherFwdHint: the publisher prefix is not announced), else back where the
        # notify came from
        hops = self.fwd.lookup(notify.msg_name(publisher, topic, nonce))
        if not hops and fwd:
            hops = self.fwd.lookup(fwd)
        if not hops:
            hops = [face]
        buf = bytearray(len(publisher) + len(topic) + len(fwd or b"") + _OVERHEAD)
        for _ in range(self.retries):
            n = notify.encode_msg_interest(buf, 0, publisher, topic, nonce,
                                           interest_nonce=_nonce(), lifetime_ms=self.timeout_ms,
                                           fwd_hint=fwd or None)
            pkt = bytes(buf[:n])
            reply = await self._express(pkt, hops)
            if reply is not None:
                return reply
        return None

    async def _express(self, pkt: bytes, hops: Sequence[Face],
                       nacked: list[bool] | None = None) -> bytes | None:
        """Send an Interest, wait for its Data (None on timeout or Nack; a Nack also
        appends True to `nacked`)."""
        i = ndn_interest.decode_interest(pkt)
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()

        def sink(reply: bytes | None, nack_reason: int | None) -> None:
            if not fut.done():
                if nack_reason is not None and nacked is not None:
                    nacked.append(True)
                fut.set_result(reply)

        if self.fwd.add_pending(bytes(i.name), i.nonce, self.timeout_ms, sink=sink):
            for h in hops:
                h.send_packet(pkt)
        return await fut

    def _ack(self, face: HubFace, notify_name: bytes) -> None:
        face.send_packet(bytes(_encode_ack(notify_name)))

    # ---- fan-out ----------------------------------------------------------------------

    def publish(self, msg: Message, boards: Iterable[BoardState] | None = None, *,
                listeners: bool = True) -> None:
        """Relay one message to every listener and every board whose filters match.

        With `boards`, to exactly those boards instead (a directed message, seed 003), and
        to listeners and NDN apps only if `listeners`; publish hooks are skipped then."""
        if boards is None:
            for hook in self.publish_hooks:
                try:
                    if hook(msg):
                        return
                except Exception:  # noqa: BLE001 - a broken hook must not stop the relay
                    log.exception("publish hook failed")
        self.counters["messages"] += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("message %s from %s via %s (%d B)", msg.topic.decode(errors="replace"),
                      msg.origin, msg.ingress, len(msg.payload))
        stats = self.topics.get(msg.topic)
        if stats is None:
            stats = self.topics[msg.topic] = TopicStats()
        stats.add(msg)
        self.journal_outcome(msg, None, "relayed")
        if boards is not None:
            for b in boards:
                self._enqueue(b, msg)
        if not listeners:
            return
        for listener in self.listeners:
            try:
                listener(msg)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the relay
                log.exception("listener failed")
        line = msg.line()
        receivers: Iterable[BoardState] = (
            self.app_subs.values() if boards is not None
            else itertools.chain(self.boards.values(), self.app_subs.values()))
        for b in receivers:
            if b.filter.matches(line):
                self._enqueue(b, msg)

    def _enqueue(self, b: BoardState, msg: Message) -> None:
        dropped = b.enqueue(msg)  # a full outbox drops its oldest message: journaled
        if dropped is not None:
            self.journal_outcome(dropped, b.name, "dropped")

    def journal_outcome(self, msg: Message, egress: str | None, outcome: str) -> None:
        """One journal record: msg relayed (egress None, with its payload), or what became
        of it at one egress (delivered/dropped/nacked). All records of one message share
        its t_bridge, so the pipeline's event-time windows keep them together."""
        j = self.journal
        if j is None:
            return
        rec = {"t_board": msg.t_board, "t_bridge": round(msg.t_recv * 1000, 3),
               "topic": msg.topic.decode(errors="replace"), "origin": msg.origin,
               "ingress": msg.ingress, "egress": egress, "size": len(msg.payload),
               "outcome": outcome}
        if egress is None:
            rec["payload"] = msg.payload.hex()
        else:
            rec["latency_ms"] = round((time.time() - msg.t_recv) * 1000, 3)
        j.record(rec)

    def _journal_event(self, outcome: str, origin: str, ingress: str, **extra: Any) -> None:
        """A journal record about a board rather than a message (board_up, board_down,
        fetch_failed), timed now."""
        if self.journal is not None:
            self.journal.record({"t_bridge": round(time.time() * 1000, 3), "origin": origin,
                                 "ingress": ingress, "outcome": outcome, **extra})

    # ---- hub -> board: seed 000 with the hub as the publisher -------------------------

    async def _deliver_loop(self, b: BoardState) -> None:
        sem = asyncio.Semaphore(self.window)
        while True:
            while not b.outbox:
                b.wake.clear()
                await b.wake.wait()
            if not b.face.up:
                await asyncio.sleep(0.2)
                continue
            msg = b.outbox.popleft()
            await sem.acquire()
            self._spawn(self._deliver_one(b, msg, sem))

    async def _deliver_one(self, b: BoardState, msg: Message, sem: asyncio.Semaphore) -> None:
        nonce = os.urandom(4)
        try:
            topic = ndn_name.from_uri(msg.topic.decode())
            buf = bytearray(len(topic) + len(self.prefix) + len(msg.payload) + _OVERHEAD)
            n = notify.encode_msg_data(buf, 0, self.prefix, topic, nonce, msg.payload,
                                       signer=SIGNER)
            self._serve[nonce] = bytes(buf[:n])
            for _ in range(self.retries):
                nb = bytearray(len(topic) + len(self.prefix) + _OVERHEAD)
                n = notify.encode_notify_interest(nb, 0, topic, self.prefix, nonce,
                                                  lifetime_ms=self.timeout_ms, signer=SIGNER)
                nacked: list[bool] = []
                if await self._express(bytes(nb[:n]), [b.face], nacked) is not None:
                    b.counters["delivered"] += 1
                    self.journal_outcome(msg, b.name, "delivered")
                    return
                if not b.face.up:
                    break
            b.counters["deliver_failed"] += 1
            self.journal_outcome(msg, b.name, "nacked" if nacked else "dropped")
        finally:
            self._serve.pop(nonce, None)
            sem.release()

    # ---- lifetime ----------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.fwd.close()


def _notify_topic(prefix: bytes) -> bytes | None:
    """The topic of a registered `/<topic>/notify` prefix, or None."""
    comps = ndn_name.components(prefix)
    if len(comps) >= 2 and bytes(comps[-1]) == NOTIFY_COMPONENT:
        return prefix[: len(prefix) - len(NOTIFY_COMPONENT)]
    return None


def _encode_ack(notify_name: bytes) -> bytearray:
    buf = bytearray(len(notify_name) + _OVERHEAD)
    n = notify.encode_ack_data(buf, 0, notify_name, signer=SIGNER)
    return buf[:n]


def _nonce() -> int:
    return int.from_bytes(os.urandom(4), "big")
