"""The hub's state and the helpers its parts share: counters, the subscriber tables, the
hooks, Interests out with their Data awaited, acks and Nacks, the journal records and the
drop counting every delivery path goes through. The notify intake (intake.py), the
delivery to boards (delivery.py) and the hub itself (hub.py) build on it."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pubmote.core.auth import BoardAuth
from pubmote.core.filter_index import FilterIndex
from pubmote.core.forwarder import Face, Forwarder
from pubmote.core.journal import Journal
from pubmote.core.limits import LimitHits, Limits
from pubmote.core.messages import Listener, Message
from pubmote.core.registry import BoardInfo, BoardState, HubFace
from pubmote.core.topic_table import TopicTable
from pubmote_wire import control, lp, notify
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name

log = logging.getLogger("pubmote.hub")

SIGNER = notify.DIGEST  # the hub's own packets carry DigestSha256 (the codec's one signer)
# room for everything but the names and payload in a notify/msg packet: TLV headers,
# notify and msg components, params digest, nonces, lifetime, signature info and value
OVERHEAD = 256


def new_nonce() -> int:
    """A random Interest nonce."""
    return int.from_bytes(os.urandom(4), "big")


class _Keep:
    """attach()'s default: the part it names stays as it is."""


KEEP = _Keep()


class HubBase:
    """State shared by the hub's parts; not used on its own."""

    def __init__(self, *, gateway: str = "gw", timeout_ms: int = 2000, retries: int = 3,
                 board_queue_len: int = 64, window: int = 4, batch_link: bool = True,
                 limits: Limits | None = None, hits: LimitHits | None = None) -> None:
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
        self.batch_link = batch_link  # accept link batches from boards that offer them
        self._topic_uris: dict[bytes, bytes] = {}  # a batch topic's Name -> its URI
        self.boards: dict[str, BoardState] = {}
        self.app_subs: dict[int, BoardState] = {}  # NDN apps' PubSub subscriptions, by face
        self.faces: dict[int, HubFace] = {}
        self.tracer: Any = None
        self.auth: BoardAuth | None = None
        self.journal: Journal | None = None
        self.topics = TopicTable(lim.max_topics, self.hits)
        self._listeners: list[Listener] = []
        # called with each board as it (re)registers: retained topics hand it last values
        self._register_hooks: list[Callable[[BoardInfo], None]] = []
        # see every message before fan-out; a hook returning True has taken it over
        # (directed messages: the mesh relay routes them itself)
        self._publish_hooks: list[Callable[[Message], bool]] = []
        self._done: OrderedDict[bytes, bool] = OrderedDict()  # publisher+nonce fetched
        self._inflight: set[bytes] = set()
        self._serve: dict[bytes, bytes] = {}  # our NotifyNonce -> msg Data, until acked
        self._tasks: set[asyncio.Task[Any]] = set()
        # acks wait for the end of the loop turn: every message relayed in the turn is
        # written to its subscribers' sockets first (flush_relays), then the acks go out
        self._flushers: list[Callable[[], None]] = []
        self._acks: list[tuple[HubFace, bytes]] = []  # drained every turn
        self._flush_due = False
        self.intake_open = True  # False once the bridge stops: nothing new is taken in
        self._index: FilterIndex | None = None  # every subscriber's filters (publish)
        self._index_key: tuple[int, int, int] = (0, 0, 0)
        self.counters = {"messages": 0, "bad_packets": 0, "nacks_sent": 0, "nacks_recv": 0,
                         "unknown_board_refused": 0, "fetch_failed": 0, "rib_commands": 0,
                         "rib_refused": 0, "localhost_dropped": 0, "inline": 0,
                         "inline_refused": 0, "batched": 0, "batch_refused": 0,
                         "journal_failures": 0, "refused_stopping": 0,
                         # failures inside the bridge's own code (a listener, a hook, a
                         # packet handler, a task) that input provoked: contained, counted
                         "listener_errors": 0, "hook_errors": 0, "packet_errors": 0,
                         "task_errors": 0, "boards_evicted": 0, "internal_errors": 0}

    def attach(self, *, auth: BoardAuth | None | _Keep = KEEP,
               journal: Journal | None | _Keep = KEEP, tracer: Any = KEEP) -> None:
        """Give the hub the parts the bridge builds from its configuration: the board
        policy (`auth`), the message `journal` and the packet `tracer`. Each one named
        replaces the hub's (None takes it away); the others stay as they are."""
        if not isinstance(auth, _Keep):
            self.auth = auth
        if not isinstance(journal, _Keep):
            self.journal = journal
        if not isinstance(tracer, _Keep):
            self.tracer = tracer

    @property
    def journaling(self) -> bool:
        """Whether a journal is attached: callers skip building records it would take."""
        return self.journal is not None

    def set_counters(self, values: dict[str, int]) -> None:
        """Set counters another part keeps (the mesh's gap tracking) among the hub's own,
        so the bridge's stats show them with the rest."""
        self.counters.update(values)

    def forget_fetched(self) -> None:
        """Forget which notifies were fetched already, so the same ones count as new
        (a bench replays one set of frames)."""
        self._done.clear()

    def _fault(self, key: str, what: str) -> None:
        """Count a contained failure (called in an except block) and log it with its
        traceback: the first of each kind, then every 1000th (a peer that provokes it
        over and over must not flood the log)."""
        self.counters[key] += 1
        n = self.counters[key]
        if n == 1 or n % 1000 == 0:
            log.exception("%s failed (%d so far, counted in %s)", what, n, key)

    def _count_board(self, face: HubFace, key: str) -> None:
        b = self.boards.get(face.board or "")
        if b is not None:
            b.counters[key] += 1

    async def _express(self, pkt: bytes, hops: Sequence[Face], nacked: list[bool] | None = None,
                       owner: Face | None = None) -> bytes | None:
        """Send an Interest on behalf of `owner` (the face whose share of the PIT it counts
        in), wait for its Data (None on timeout, Nack or refusal; a Nack also appends True to
        `nacked`)."""
        i = ndn_interest.decode_interest(pkt)
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()

        def sink(reply: bytes | None, nack_reason: int | None) -> None:
            if not fut.done():
                if nack_reason is not None and nacked is not None:
                    nacked.append(True)
                fut.set_result(reply)

        if self.fwd.add_pending(bytes(i.name), i.nonce, self.timeout_ms, sink=sink,
                                owner=owner):
            for h in hops:
                h.send_packet(pkt)
        return await fut

    def _ack(self, face: HubFace, notify_name: bytes) -> None:
        self.ack_after_relay(face, bytes(control.encode_ack(notify_name)))

    def ack_after_relay(self, face: HubFace, pkt: bytes) -> None:
        """Send an ack (a notify's, a batch's ACKS) once everything relayed so far has been
        written to every connected subscriber's socket (or its buffer there): acked means
        handed on. Once intake has stopped, nothing more is acked."""
        if not self.intake_open:
            return
        self._acks.append((face, pkt))
        self.flush_soon()

    def add_flusher(self, fn: Callable[[], None]) -> None:
        """fn writes what a relay queued this turn (an SP PUB endpoint's flush); it runs at
        the end of every turn that relayed or acked something, before the acks."""
        self._flushers.append(fn)

    def remove_flusher(self, fn: Callable[[], None]) -> None:
        if fn in self._flushers:
            self._flushers.remove(fn)

    def flush_soon(self) -> None:
        """Have flush_relays run at the end of this loop turn (once, however many ask)."""
        if self._flush_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside a loop (a unit test): at once
            self.flush_relays()
            return
        self._flush_due = True
        loop.call_soon(self.flush_relays)

    def flush_relays(self) -> None:
        """Write what this turn relayed to the subscribers' sockets, then send the acks:
        the order that makes an ack mean "handed on" (docs/guarantees.md)."""
        self._flush_due = False
        for fn in self._flushers:
            try:
                fn()
            except Exception:  # noqa: BLE001 - one broken endpoint must not hold back acks
                log.exception("flushing a relay failed")
        acks, self._acks = self._acks, []
        for face, pkt in acks:
            face.send_packet(pkt)

    def stop_intake(self) -> None:
        """The first step of an orderly stop: from now on nothing new is relayed or acked
        (packets from faces are dropped, publish refuses); what was acked before is still
        queued and goes out with the next flush_relays."""
        self.intake_open = False

    def clock_ms(self) -> int:
        """The gateway's clock, ms since 1970: what boards set theirs from at registration."""
        return int(time.time() * 1000)

    def _reply(self, face: HubFace, nm: bytes, content: bytes) -> None:
        face.send_packet(ndn_data.encode(nm, content, freshness_ms=0, signer=SIGNER))

    def _send_nack(self, face: HubFace, pkt: bytes) -> None:
        buf = bytearray(len(pkt) + 32)
        n = lp.encode_nack(buf, 0, pkt, lp.NACK_NO_ROUTE)
        face.send_packet(bytes(buf[:n]))
        self.counters["nacks_sent"] += 1

    def _enqueue(self, b: BoardState, msg: Message) -> None:
        dropped = b.enqueue(msg)  # a full outbox drops its oldest message: journaled
        if dropped is not None:
            self.journal_outcome(dropped, b.name, "dropped")

    def journal_outcome(self, msg: Message, egress: str | None, outcome: str) -> None:
        """One journal record: msg relayed (egress None, with its payload), or what became
        of it at one egress (delivered/dropped/nacked). All records of one message share
        its t_bridge, so the pipeline's event-time windows keep them together, and its
        t_taken (the publisher's taken-time, None when it has no synced clock)."""
        j = self.journal
        if j is None:
            return
        rec: dict[str, Any] = {
            "t_board": msg.t_board, "t_bridge": round(msg.t_recv * 1000, 3),
            "t_taken": msg.t_taken,
            "topic": msg.topic.decode(errors="replace"), "origin": msg.origin,
            "ingress": msg.ingress, "egress": egress, "size": len(msg.payload),
            "outcome": outcome}
        if egress is None:
            rec["payload"] = msg.payload.hex()
        else:
            rec["latency_ms"] = round((time.time() - msg.t_recv) * 1000, 3)
        self._journal_record(j, rec)

    def _journal_record(self, j: Journal, rec: dict[str, Any]) -> None:
        # the journal is beside the relay, never in its way: it holds what the disk refuses
        # itself, and any other failure of it is counted here, not raised into the relay
        try:
            j.record(rec)
        except Exception:  # noqa: BLE001
            self.counters["journal_failures"] += 1
            if self.counters["journal_failures"] == 1:
                log.exception("journal failed (counted in journal_failures)")

    def _journal_event(self, outcome: str, origin: str, ingress: str, **extra: Any) -> None:
        """A journal record about a board rather than a message (board_up, board_down,
        fetch_failed), timed now."""
        if self.journal is not None:
            self._journal_record(self.journal, {
                "t_bridge": round(time.time() * 1000, 3), "origin": origin,
                "ingress": ingress, "outcome": outcome, **extra})

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._task_done)
        return t

    def _task_done(self, t: asyncio.Task[Any]) -> None:
        self._tasks.discard(t)
        if t.cancelled():
            return
        exc = t.exception()  # retrieved: a failed task is counted, never silent
        if exc is not None:
            self.counters["task_errors"] += 1
            n = self.counters["task_errors"]
            if n == 1 or n % 1000 == 0:
                log.error("hub task %s failed (%d so far, counted in task_errors)",
                          t.get_coro(), n, exc_info=exc)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.fwd.close()

    def publish(self, msg: Message, boards: Iterable[str] | None = None, *,
                listeners: bool = True) -> None:
        """Relay one message to every listener and every board whose filters match.

        With `boards` (names), to exactly those boards instead (a directed message), and to
        listeners and NDN apps only if `listeners`; publish hooks are skipped then.
        Once intake has stopped (stop_intake), refused and counted."""
        if not self.intake_open:
            self.counters["refused_stopping"] += 1
            return
        if boards is None:
            for hook in self._publish_hooks:
                try:
                    if hook(msg):
                        return
                except Exception:  # noqa: BLE001 - a broken hook must not stop the relay
                    self._fault("hook_errors", "publish hook")
        self.counters["messages"] += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("message %s from %s via %s (%d B)", msg.topic.decode(errors="replace"),
                      msg.origin, msg.ingress, len(msg.payload))
        self.topics.note(msg)
        if self.journal is not None:
            self.journal_outcome(msg, None, "relayed")
        if boards is not None:
            for name in boards:
                self.deliver(name, msg)
        if not listeners:
            return
        for listener in self._listeners:
            try:
                listener(msg)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the relay
                self._fault("listener_errors", "listener")
        line = msg.line()
        if boards is not None:
            for b in self.app_subs.values():
                if b.filter.matches(line):
                    self._enqueue(b, msg)
            return
        # every subscriber's filters, indexed; rebuilt when a subscriber or filter has
        # changed since (boards are never removed, app subscriptions are)
        index = self._index
        key = (BoardState.generation, len(self.boards), len(self.app_subs))
        if index is None or key != self._index_key:
            index = self._index = FilterIndex(itertools.chain(self.boards.values(),
                                                              self.app_subs.values()))
            self._index_key = key
        for b in index.match(line):
            self._enqueue(b, msg)

    def deliver(self, board: str, msg: Message) -> bool:
        """Queue msg for one board (as any relayed message: a full queue drops its oldest,
        counted and journaled); False if no board has that name."""
        b = self.boards.get(board)
        if b is None:
            return False
        self._enqueue(b, msg)
        return True
