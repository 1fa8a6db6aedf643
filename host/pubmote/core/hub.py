"""The pub/sub hub: boards register their filters (registrar.py), publish with the NDN
notify protocol (the hub fetches and acks: intake.py) and receive with it (the hub
publishes, the board fetches and acks: delivery.py). NDN apps register prefixes with NFD's
rib commands. Every message fans out through one relay (relay.py); acks wait for the
turn's relays to be written (acks.py).

The Hub owns the tables (boards, faces, NDN app subscriptions), the forwarder and the
counters, builds its parts around them, and dispatches each packet a face hands it to the
part whose job it is. Everyone else uses the small API at the end of the class: hooks for
events, read-only snapshots of boards, and delivery through the hub's own drop counting
and journaling (docs/architecture.md lists it)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from pubmote.core import nfd_mgmt
from pubmote.core.acks import AckGate
from pubmote.core.auth import BoardAuth
from pubmote.core.delivery import Delivery
from pubmote.core.exchange import Exchange, reply, send_nack
from pubmote.core.forwarder import Face, Forwarder
from pubmote.core.intake import NotifyIntake, app_may
from pubmote.core.journal import Journal
from pubmote.core.limits import LimitHits, Limits
from pubmote.core.messages import Listener, Message, TopicStats
from pubmote.core.records import JournalFeed
from pubmote.core.registrar import Registrar
from pubmote.core.registry import BoardInfo, BoardState, HubFace
from pubmote.core.relay import Relay
from pubmote.core.sleepers import SleepSessions
from pubmote.core.tasks import TaskSet, count_fault
from pubmote.core.topic_table import TopicTable
from pubmote_wire import control, lp, notify
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.batch import BATCH, BATCH_T
from pubmote_wire.data import DATA
from pubmote_wire.errors import DecodeError
from pubmote_wire.interest import INTEREST
from pubmote_wire.lp import LP_PACKET

log = logging.getLogger("pubmote.hub")

__all__ = ["BoardInfo", "BoardState", "Hub", "HubFace", "Message", "TopicStats"]


class _Keep:
    """attach()'s default: the part it names stays as it is."""


KEEP = _Keep()


class Hub:
    """The bridge's pub/sub core; faces hand it packets through `on_packet`."""

    def __init__(self, *, gateway: str = "gw", timeout_ms: int = 2000, retries: int = 3,
                 board_queue_len: int = 64, window: int = 4, batch_link: bool = True,
                 limits: Limits | None = None, hits: LimitHits | None = None,
                 sleep_queue_max: int = 64, sleep_queue_bytes: int = 16384,
                 session_expiry_s: float = 3600.0,
                 sleep_clock_s: Callable[[], float] = time.time) -> None:
        self.gateway = gateway
        self.prefix = ndn_name.from_uri("/pubmote/gw/%s" % gateway)
        self.limits = lim = limits if limits is not None else Limits()
        self.hits = hits if hits is not None else LimitHits()  # every limit hit, by key
        self.fwd = Forwarder(max_pit=lim.pit_max, max_pit_per_face=lim.pit_max_per_face,
                             max_fib=lim.fib_max, max_fib_per_face=lim.fib_max_per_face,
                             max_lifetime_ms=lim.pit_max_lifetime_ms,
                             max_nonces=lim.pit_max_nonces, hits=self.hits)
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.board_queue_len = board_queue_len
        self.window = window
        self.max_boards = lim.max_boards
        self.boards: dict[str, BoardState] = {}
        self.app_subs: dict[int, BoardState] = {}  # NDN apps' PubSub subscriptions, by face
        self.faces: dict[int, HubFace] = {}
        self.tracer: Any = None
        self.auth: BoardAuth | None = None
        self.topics = TopicTable(lim.max_topics, self.hits)
        self.counters = {"messages": 0, "bad_packets": 0, "nacks_sent": 0, "nacks_recv": 0,
                         "unknown_board_refused": 0, "fetch_failed": 0, "rib_commands": 0,
                         "rib_refused": 0, "localhost_dropped": 0, "inline": 0,
                         "inline_refused": 0, "batched": 0, "batch_refused": 0,
                         "journal_failures": 0, "refused_stopping": 0,
                         # failures inside the bridge's own code (a listener, a hook, a
                         # packet handler, a task) that input provoked: contained, counted
                         "listener_errors": 0, "hook_errors": 0, "packet_errors": 0,
                         "task_errors": 0, "boards_evicted": 0, "internal_errors": 0}
        # the parts, each with its own state, given what it needs here
        self._tasks = TaskSet(self.counters)
        self._gate = AckGate()
        self._feed = JournalFeed(self.counters)
        self._exchange = Exchange(self.fwd, timeout_ms=timeout_ms)
        self._sleepers = SleepSessions(queue_max=sleep_queue_max, queue_bytes=sleep_queue_bytes,
                                       expiry_s=session_expiry_s, counters=self.counters,
                                       feed=self._feed, forget=self._session_expired,
                                       watch=self._watch_sleepers, clock_s=sleep_clock_s)
        self._sweeping: asyncio.Task[None] | None = None
        self._relay = Relay(boards=self.boards, app_subs=self.app_subs, topics=self.topics,
                            counters=self.counters, feed=self._feed, gate=self._gate,
                            sleepers=self._sleepers)
        self._delivery = Delivery(prefix=self.prefix, exchange=self._exchange,
                                  feed=self._feed, tasks=self._tasks, retries=retries,
                                  window=window, sleepers=self._sleepers)
        self._intake = NotifyIntake(boards=self.boards, policy=self._policy, fwd=self.fwd,
                                    exchange=self._exchange, publish=self._relay.publish,
                                    gate=self._gate, feed=self._feed, counters=self.counters,
                                    retries=retries)
        self._registrar = Registrar(prefix=self.prefix, boards=self.boards,
                                    policy=self._policy, fwd=self.fwd, relay=self._relay,
                                    delivery=self._delivery, feed=self._feed,
                                    counters=self.counters, hits=self.hits,
                                    max_boards=lim.max_boards, queue_len=board_queue_len,
                                    batch_link=batch_link, clock_ms=self._clock,
                                    sleepers=self._sleepers)

    def _session_expired(self, b: BoardState, why: str) -> None:
        log.info("board %s: its sleep session expired (%s); forgotten with %d queued", b.name,
                 why, len(b.outbox))
        self._registrar.forget(b, "session_expired")

    def _watch_sleepers(self) -> None:
        # a board fell asleep: expired sessions are swept every second while any sleeps
        if self._sweeping is None or self._sweeping.done():
            try:
                self._sweeping = self._tasks.spawn(self._sweep_sleepers())
            except RuntimeError:  # no event loop (a test driving the hub by hand)
                self._sweeping = None

    async def _sweep_sleepers(self) -> None:
        while len(self._sleepers):
            await asyncio.sleep(1.0)
            self.sweep_sessions()

    def sweep_sessions(self) -> int:
        """End the sleep sessions past their expiry (each second while a board sleeps);
        the number ended."""
        return self._sleepers.sweep()

    def _policy(self) -> BoardAuth | None:
        return self.auth

    def _clock(self) -> int:
        return self.clock_ms()  # looked up at each call: the clock is the hub's to replace

    def attach(self, *, auth: BoardAuth | _Keep | None = KEEP,
               journal: Journal | _Keep | None = KEEP, tracer: Any = KEEP) -> None:
        """Give the hub the parts the bridge builds from its configuration: the board
        policy (`auth`), the message `journal` and the packet `tracer`. Each one named
        replaces the hub's (None takes it away); the others stay as they are."""
        if not isinstance(auth, _Keep):
            self.auth = auth
        if not isinstance(journal, _Keep):
            self._feed.journal = journal
        if not isinstance(tracer, _Keep):
            self.tracer = tracer

    @property
    def journal(self) -> Journal | None:
        return self._feed.journal

    @property
    def batch_link(self) -> bool:
        """Whether boards that offer link batches get them."""
        return self._registrar.batch_link

    @batch_link.setter
    def batch_link(self, on: bool) -> None:
        self._registrar.batch_link = on

    @property
    def intake_open(self) -> bool:
        """False once the bridge stops (stop_intake): nothing new is taken in."""
        return self._gate.open

    def face_state(self, face: HubFace) -> None:
        if face.up:
            self.faces[face.face_id] = face
            face.tracer = self.tracer
            if face.kind != "ndn":
                # a board that was on this line before the bridge (re)started hears a hello
                # and re-registers at once instead of waiting for its keepalive
                face.send_packet(control.encode_hello(os.urandom(4), -1))
        else:
            self.faces.pop(face.face_id, None)
            self.fwd.remove_face(face)
            b = self.boards.get(face.board or "")
            if b is not None and b.face is face and not b.down:
                self._registrar.mark_down(b)
            sub = self.app_subs.pop(face.face_id, None)
            if sub is not None and sub.worker is not None:
                sub.worker.cancel()

    def on_packet(self, face: HubFace, pkt: bytes) -> None:
        if not self._gate.open:
            return  # the bridge is stopping: nothing new comes in, nothing more is acked
        if self.tracer is not None:
            self.tracer.record(face.label, "in", pkt)
        b = self.boards.get(face.board) if face.board is not None else None
        if b is not None and b.face is face:
            b.heard_s = time.monotonic()  # alive, whatever it says (core/sleepers.py)
        try:
            self._dispatch(face, pkt)
        except Exception:  # nothing a peer sends may close another's face
            n = self.counters["internal_errors"] = self.counters["internal_errors"] + 1
            if n & (n - 1) == 0:  # said, not flooded
                log.exception("a packet from %s failed (%d so far)", face.label, n)

    def _dispatch(self, face: HubFace, pkt: bytes) -> None:
        try:
            if not pkt:  # a good frame of no bytes (its CRC only): nothing to dispatch
                raise DecodeError("empty packet")
            typ = pkt[0]
            if typ == INTEREST:
                self._on_interest(face, pkt)
            elif typ == DATA:
                d = ndn_data.decode_data(pkt)
                self.fwd.satisfy(bytes(d.name), pkt, face)
            elif typ == LP_PACKET:
                self._on_lp(face, pkt)
            elif typ == BATCH or typ == BATCH_T:
                self._intake.on_batch(face, pkt)
            else:
                raise DecodeError("not an NDN packet (type %d)" % typ)
        except DecodeError as e:
            self.counters["bad_packets"] += 1
            log.debug("bad packet from %s: %s", face.label, e)
        except Exception:  # noqa: BLE001 - a packet that trips a bug costs that packet only
            count_fault(self.counters, "packet_errors", "packet from %s" % face.label)

    def _on_lp(self, face: HubFace, pkt: bytes) -> None:
        p = lp.decode_lp(pkt)
        if p.fragment is None:
            return
        inner = bytes(p.fragment)
        typ = inner[0] if inner else -1
        if typ == LP_PACKET:
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
        if typ == INTEREST:
            self._on_interest(face, inner)
        elif typ == DATA:
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
        if nm.startswith(control.REGISTER):
            self._registrar.on_register(face, i, nm, pkt)
            return
        our_nonce = control.fetched_nonce(nm, self.prefix)
        if our_nonce is not None:
            served = self._delivery.served(our_nonce)
            if served is not None:
                face.send_packet(served)
            else:
                send_nack(face, pkt, self.counters)
            return
        try:
            topic, publisher, nonce, fwd_hint, ni = notify.notify_parts(i, pkt)
        except DecodeError:
            topic = None
        if topic is not None:
            if self._intake.refused(face, bytes(topic), bytes(publisher), ni, pkt):
                return  # rejected (counted and logged by the policy)
            inline = notify.inline_msg(ni)
            self._tasks.spawn(self._intake.on_notify(
                face, nm, bytes(topic), bytes(publisher), bytes(nonce),
                bytes(fwd_hint) if fwd_hint is not None else None, ni.sig_time_ms,
                bytes(inline) if inline is not None else None, notify.taken_ms(ni)))
            return
        # anything else is forwarded along the FIB (an app or board serving that prefix)
        hops = [h for h in self.fwd.lookup(nm) if h.face_id != face.face_id]
        if not hops:
            self.fwd.counters["no_route"] += 1
            send_nack(face, pkt, self.counters)
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
            reply(face, nm, nfd_mgmt.control_response(400, "malformed command: %s" % e,
                                                            None))
            return
        prefix = params["name"]
        params["face_id"] = face.face_id
        if register and not app_may(face, prefix, "a rib/register of"):
            self.counters["rib_refused"] += 1
            reply(face, nm, nfd_mgmt.control_response(
                403, "outside the prefixes this face allows (ndn_allow_prefixes)", None))
            return
        if register and not self.fwd.add_route(prefix, face):
            self.counters["rib_refused"] += 1
            reply(face, nm, nfd_mgmt.control_response(
                403, "FIB full (%d routes, %d per face)" % (self.fwd.max_fib,
                                                           self.fwd.max_fib_per_face), None))
            return
        if not register:
            self.fwd.remove_route(prefix, face)
        topic = control.notify_topic(prefix)
        if topic is not None:
            self._app_subscription(face, topic, register)
        reply(face, nm, nfd_mgmt.control_response(200, "OK", params))

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
            sub.worker = self._delivery.start(sub)
        filters = [f for f in sub.filters if f != line]
        if add:
            filters.append(line)
        sub.set_filters(filters)

    # ---- the API for everyone else: messages, events, snapshots ------------------------

    def publish(self, msg: Message, boards: Iterable[str] | None = None, *,
                listeners: bool = True) -> None:
        """Relay one message to every listener and every board whose filters match.

        With `boards` (names), to exactly those boards instead (a directed message), and to
        listeners and NDN apps only if `listeners`; publish hooks are skipped then.
        Once intake has stopped (stop_intake), refused and counted."""
        self._relay.publish(msg, boards, listeners=listeners)

    def deliver(self, board: str, msg: Message) -> bool:
        """Queue msg for one board (as any relayed message: a full queue drops its oldest,
        counted and journaled); False if no board has that name."""
        return self._relay.deliver(board, msg)

    @property
    def journaling(self) -> bool:
        """Whether a journal is attached: callers skip building records it would take."""
        return self._feed.journaling

    def journal_outcome(self, msg: Message, egress: str | None, outcome: str) -> None:
        """One journal record: msg relayed (egress None, with its payload), or what became
        of it at one egress (delivered/dropped/nacked)."""
        self._feed.outcome(msg, egress, outcome)

    def add_flusher(self, fn: Callable[[], None]) -> None:
        """fn writes what a relay queued this turn (an SP PUB endpoint's flush); it runs at
        the end of every turn that relayed or acked something, before the acks."""
        self._gate.add_flusher(fn)

    def remove_flusher(self, fn: Callable[[], None]) -> None:
        self._gate.remove_flusher(fn)

    def flush_soon(self) -> None:
        """Have flush_relays run at the end of this loop turn (once, however many ask)."""
        self._gate.flush_soon()

    def flush_relays(self) -> None:
        """Write what this turn relayed to the subscribers' sockets, then send the acks:
        the order that makes an ack mean "handed on" (docs/guarantees.md)."""
        self._gate.flush_relays()

    def stop_intake(self) -> None:
        """The first step of an orderly stop: from now on nothing new is relayed or acked
        (packets from faces are dropped, publish refuses); what was acked before is still
        queued and goes out with the next flush_relays."""
        self._gate.close()

    def clock_ms(self) -> int:
        """The gateway's clock, ms since 1970: what boards set theirs from at registration."""
        return int(time.time() * 1000)

    def set_counters(self, values: dict[str, int]) -> None:
        """Set counters another part keeps (the mesh's gap tracking) among the hub's own,
        so the bridge's stats show them with the rest."""
        self.counters.update(values)

    def forget_fetched(self) -> None:
        """Forget which notifies were fetched already, so the same ones count as new
        (a bench replays one set of frames)."""
        self._intake.forget_fetched()

    async def close(self) -> None:
        await self._tasks.close()
        self.fwd.close()

    def add_listener(self, fn: Listener) -> None:
        """Call fn with every message the hub relays (after publish hooks)."""
        self._relay.add_listener(fn)

    def remove_listener(self, fn: Listener) -> None:
        self._relay.remove_listener(fn)

    def has_listener(self, fn: Listener) -> bool:
        return self._relay.has_listener(fn)

    def add_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        """fn sees each new message before fan-out; returning True, it has taken it over."""
        self._relay.add_publish_hook(fn)

    def remove_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        self._relay.remove_publish_hook(fn)

    def add_register_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        """Call fn with a snapshot of each board as it registers or re-registers."""
        self._registrar.add_hook(fn)

    def remove_register_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        self._registrar.remove_hook(fn)

    def unsigned_refused(self, topic_uri: bytes, what: str) -> bool:
        """For an ingress that cannot carry a board's signature (an SP publisher, an open
        mesh realm): True, counted and logged, when the topic (a URI) is under a
        --require-signed prefix, so no path bypasses it."""
        if self.auth is None or not self.auth.signed_prefixes:
            return False
        try:
            topic = ndn_name.from_uri(topic_uri.decode())
        except (DecodeError, UnicodeDecodeError, ValueError):
            return False  # not a topic: the ingress refuses it as malformed
        if not self.auth.requires(topic):
            return False
        self.auth.reject("unsigned_ingress", None, what)
        return True

    def board(self, name: str) -> BoardInfo | None:
        """A snapshot of the board registered as `name`, or None."""
        b = self.boards.get(name)
        return b.info() if b is not None else None

    def board_infos(self) -> list[BoardInfo]:
        """Snapshots of every board known (up or down), in registration order."""
        return [b.info() for b in self.boards.values()]

    def board_names(self) -> list[str]:
        return list(self.boards)

    # named data a part of the gateway serves from inside the hub (the update producer)
    def add_route(self, prefix: bytes, face: Face) -> bool:
        """Route Interests under prefix to face; False (counted) when the FIB is full."""
        return self.fwd.add_route(prefix, face)

    def remove_route(self, prefix: bytes, face: Face) -> None:
        self.fwd.remove_route(prefix, face)

    def satisfy(self, name: bytes, pkt: bytes, face: Face | None) -> bool:
        """Send Data pkt to every face waiting for exactly name; False if none was."""
        return self.fwd.satisfy(name, pkt, face)

    def send_to_board(self, board: str, pkt: bytes) -> bool:
        """Send pkt on the face of the board registered as board; False when it is down."""
        b = self.boards.get(board)
        if b is None or b.down or not b.face.up:
            return False
        b.face.send_packet(pkt)
        return True

    def waiting_faces(self, name: bytes) -> list[int]:
        """The ids of the faces whose Interest for exactly name is pending."""
        entry = self.fwd.pit.get(bytes(name))
        return list(entry.in_faces) if entry is not None else []

    def topic_stats(self) -> dict[bytes, TopicStats]:
        """Per-topic figures (count, rate, last value), by topic URI, for the most recently
        published topics (limit max_topics); a copy of the table."""
        return self.topics.snapshot()

    def stats(self) -> dict[str, int]:
        """The hub's counters, and the PIT's size as "pit"."""
        out = dict(self.counters)
        out["pit"] = len(self.fwd.pit)
        return out
