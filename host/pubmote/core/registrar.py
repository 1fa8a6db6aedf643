"""Board registration: a board's Register Interest checked against the board policy, its
entry in the hub's board table made or moved, its routes and filters set, its delivery
started and the register hooks told; boards marked down, and the longest down forgotten
when the table is full. The reply carries the gateway's clock, signed with the board's key
when it has one."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from pubmote.core.addresses import name_problem
from pubmote.core.auth import BoardAuth
from pubmote.core.delivery import Delivery
from pubmote.core.exchange import SIGNER, new_nonce, send_nack
from pubmote.core.forwarder import Forwarder
from pubmote.core.limits import LimitHits
from pubmote.core.records import JournalFeed
from pubmote.core.registry import BoardInfo, BoardState, HubFace
from pubmote.core.relay import Relay
from pubmote.core.sleepers import SleepSessions
from pubmote.core.tasks import count_fault
from pubmote_wire import control
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.errors import DecodeError
from pubmote_wire.hmac256 import HmacSigner

log = logging.getLogger("pubmote.hub")
# a registration's board name, prefix, filters, served prefixes, batch form, boot id and
# announced sleep (ms)
RegisterParams = tuple[str, bytes, list[bytes], list[bytes], int, int | None, int | None]

# a board without a key that was heard this recently holds its name against registrations
# from other connections (three of its keepalives, 3 s each by default)
TAKEOVER_GRACE_S = 10.0


class Registrar:
    """Registers boards into the board table it is given, and tells its hooks."""

    def __init__(self, *, prefix: bytes, boards: dict[str, BoardState],
                 policy: Callable[[], BoardAuth | None], fwd: Forwarder, relay: Relay,
                 delivery: Delivery, feed: JournalFeed, counters: dict[str, int],
                 hits: LimitHits, max_boards: int, queue_len: int, batch_link: bool,
                 clock_ms: Callable[[], int], sleepers: SleepSessions) -> None:
        self._prefix = prefix
        self._boards = boards
        self._policy = policy
        self._fwd = fwd
        self._relay = relay
        self._delivery = delivery
        self._feed = feed
        self._counters = counters
        self._hits = hits
        self._max_boards = max_boards
        self._queue_len = queue_len
        self.batch_link = batch_link  # accept link batches from boards that offer them
        self._clock_ms = clock_ms  # the gateway's clock, which boards take at registration
        self._sleepers = sleepers
        # called with each board as it (re)registers: retained topics hand it last values
        self._hooks: list[Callable[[BoardInfo], None]] = []

    def add_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        self._hooks.append(fn)

    def remove_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        with contextlib.suppress(ValueError):
            self._hooks.remove(fn)

    def _params(self, face: HubFace, i: ndn_interest.Interest,
                nm: bytes) -> RegisterParams | None:
        """The registration's parameters, or None (nacked, counted and logged) when they
        are malformed or name no valid board."""
        try:
            params = control.decode_register_params(bytes(i.app_params or b""))
        except DecodeError as e:
            why = "bad registration from %s: %s" % (face.label, e)
        else:
            problem = name_problem(params[0])
            if problem is None:
                return params
            why = "registration from %s refused: board name %r: %s" % (
                face.label, params[0][:80], problem)
        self._counters["bad_packets"] += 1
        log.warning("%s", why)
        send_nack(face, ndn_interest.encode(nm, nonce=new_nonce()), self._counters)
        return None

    def on_register(self, face: HubFace, i: ndn_interest.Interest, nm: bytes,
                     pkt: bytes) -> None:
        params = self._params(face, i, nm)
        if params is None:
            return
        bname, prefix, filters, serves, offers_batch, boot, sleep_ms = params
        auth = self._policy()
        key = auth.keys.get(bname) if auth is not None else None
        if key is not None and auth is not None and auth.interest_refusal(
                bname, i, pkt, what="registration", check_time=False) is not None:
            # a board with a key registers only with it: nobody else takes its name
            auth.rejected["register_rejected"] += 1
            return
        if key is None and auth is not None and self._anonymous_refused(auth, face, bname):
            return
        # a face carries one board: a new name on it takes over from the one before
        prev = self._boards.get(face.board or "")
        if prev is not None and prev.name != bname and prev.face is face and not prev.down:
            self.mark_down(prev)
        b = self._boards.get(bname)
        if b is None:
            if len(self._boards) >= self._max_boards and not self._evict_longest_down(bname):
                self._counters["unknown_board_refused"] += 1
                self._hits.hit("max_boards", "board %s on %s refused: %d boards, all up",
                              bname, face.label, len(self._boards))
                return
            b = BoardState(bname, prefix, face, self._queue_len)
            self._boards[bname] = b
            log.info("board %s registered on %s", bname, face.label)
            self._feed.event("board_up", bname, face.label, reconnect=False)
        elif b.face is not face or b.prefix != prefix or b.down:
            self._drop_routes(b)
            log.info("board %s moved to %s", bname, face.label)
            self._feed.event("board_up", bname, face.label, reconnect=True)
        if b.boot is not None and boot != b.boot:
            log.info("board %s restarted", bname)
        b.boot = boot
        b.down = False
        b.face, b.prefix = face, prefix
        face.board = bname
        if filters != b.filters:
            b.set_filters(filters)
        # link batches for a board that offers them, unsigned only: a keyed board's
        # messages keep their HMAC from end to end
        b.batch = offers_batch if key is None and self.batch_link else 0
        b.registrations += 1
        b.last_seen = time.time()
        # its prefix and the named data it answers (python-ndn express_interest); a route
        # the FIB refuses (full: counted) only costs NDN apps that route: the hub fetches
        # from and delivers to the board on its face
        wanted = [prefix, *serves]
        for p in b.routes:
            if p not in wanted:
                self._fwd.remove_route(p, face)
        b.routes = [p for p in wanted if self._fwd.add_route(p, face)]
        if b.worker is None or b.worker.done():
            b.worker = self._delivery.start(b)
        self._sleep_state(b, sleep_ms)
        info = b.info()
        for hook in list(self._hooks):
            try:
                hook(info)
            except Exception:  # noqa: BLE001 - a broken hook must not break a registration
                count_fault(self._counters, "hook_errors", "register hook")
        b.wake.set()
        # the gateway's clock, for boards without one: the taken-time of what they publish
        # (docs/protocols/event-time.md) and their signed Interests' SignatureTime; signed
        # with the board's key so the board can trust it
        content = control.reply_content(ndn_name.to_uri(self._prefix), self._clock_ms(),
                                        b.batch)
        reply = ndn_data.encode(nm, content, freshness_ms=0,
                                signer=HmacSigner(key) if key is not None else SIGNER)
        face.send_packet(reply)

    def _sleep_state(self, b: BoardState, sleep_ms: int | None) -> None:
        # a sleep announced: its session and queue are held until it registers again
        if sleep_ms is not None:
            self._sleepers.fall_asleep(b, sleep_ms)
        elif b.asleep_since is not None:
            self._sleepers.wake(b)
            self._feed.event("board_awake", b.name, b.face.label)

    def _anonymous_refused(self, auth: BoardAuth, face: HubFace, bname: str) -> bool:
        """A board without a key registers only where anonymous boards are allowed, and
        never takes a name another connection holds: while that board is up and was heard
        in the last TAKEOVER_GRACE_S, the name is bound to its face."""
        if not auth.allow_anonymous:
            auth.reject("anonymous", bname, "registration on %s without a key" % face.label)
            return True
        b = self._boards.get(bname)
        if (b is not None and b.face is not face and not b.down and b.face.up
                and time.time() - b.last_seen < TAKEOVER_GRACE_S):
            auth.reject("takeover", bname, "registration on %s while the board is up on %s"
                        % (face.label, b.face.label))
            return True
        return False

    def mark_down(self, b: BoardState) -> None:
        b.down = True
        b.down_since = time.monotonic()
        self._drop_routes(b)
        self._feed.event("board_down", b.name, b.face.label)

    def _drop_routes(self, b: BoardState) -> None:
        for p in b.routes:
            self._fwd.remove_route(p, b.face)
        b.routes = []

    def _evict_longest_down(self, newcomer: str) -> bool:
        """Make room in a full board table: forget the board down the longest, one asleep
        only when every board down is (its queue is dropped, journaled); False when every
        board is up."""
        down = [b for b in self._boards.values() if b.down or not b.face.up]
        if not down:
            return False
        b = min(down, key=_down_since)
        self._sleepers.forgotten(b)
        self.forget(b, "board_evicted")
        self._counters["boards_evicted"] += 1
        self._hits.hit("max_boards", "board %s (down %.0f s) forgotten to make room for %s",
                      b.name, time.monotonic() - b.down_since, newcomer)
        return True

    def forget(self, b: BoardState, event: str) -> None:
        """Take b out of the board table: its delivery stopped, its queue dropped
        (journaled), its routes gone; journaled as `event`."""
        if self._boards.get(b.name) is b:
            del self._boards[b.name]
        self._relay.reindex()  # the filter index still holds it
        if b.worker is not None:
            b.worker.cancel()
        while b.outbox:
            self._feed.outcome(b.outbox.popleft(), b.name, "dropped")
        self._drop_routes(b)
        if b.face.board == b.name:
            b.face.board = None
        self._feed.event(event, b.name, b.face.label)


def _down_since(b: BoardState) -> tuple[bool, float]:
    # a board asleep (its session kept: sleepers.py) goes after every other board down
    return b.asleep_since is not None, b.down_since
