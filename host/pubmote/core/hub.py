"""The pub/sub hub: boards register their filters, publish with the NDN notify protocol
(the hub fetches and acks: intake.py) and receive with it (the hub publishes, the board
fetches and acks: delivery.py). NDN apps register prefixes with NFD's rib commands.

Every message that reaches the hub fans out to every listener (SP PUB clients, the
journal, the view) and to every board whose nanomsg-style filters match
`<topic URI>|<payload>` (hub_base.py). Everyone else uses the small API at the end of
the Hub class: hooks for events, read-only snapshots of boards, and delivery through the
hub's own drop counting and journaling."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable

from pubmote.core import nfd_mgmt
from pubmote.core.addresses import name_problem
from pubmote.core.auth import BoardAuth, board_of
from pubmote.core.delivery import Delivery
from pubmote.core.hub_base import SIGNER, new_nonce
from pubmote.core.intake import NotifyIntake
from pubmote.core.messages import Listener, Message, TopicStats
from pubmote.core.registry import BoardInfo, BoardState, HubFace
from pubmote_wire import control, lp, notify
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.batch import BATCH, BATCH_T
from pubmote_wire.data import DATA
from pubmote_wire.errors import DecodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.interest import INTEREST
from pubmote_wire.lp import LP_PACKET

log = logging.getLogger("pubmote.hub")

# a board without a key that was heard this recently holds its name against registrations
# from other connections (three of its keepalives, 3 s each by default)
TAKEOVER_GRACE_S = 10.0

__all__ = ["BoardInfo", "BoardState", "Hub", "HubFace", "Message", "TopicStats"]


class Hub(NotifyIntake, Delivery):
    """The bridge's pub/sub core; faces hand it packets through `on_packet`."""

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
                self._mark_down(b)
            sub = self.app_subs.pop(face.face_id, None)
            if sub is not None and sub.worker is not None:
                sub.worker.cancel()

    def on_packet(self, face: HubFace, pkt: bytes) -> None:
        if not self.intake_open:
            return  # the bridge is stopping: nothing new comes in, nothing more is acked
        if self.tracer is not None:
            self.tracer.record(face.label, "in", pkt)
        try:
            self._dispatch(face, pkt)
        except Exception:  # noqa: BLE001 - nothing a peer sends may close another's face
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
                self._on_batch(face, pkt)
            else:
                raise DecodeError("not an NDN packet (type %d)" % typ)
        except DecodeError as e:
            self.counters["bad_packets"] += 1
            log.debug("bad packet from %s: %s", face.label, e)
        except Exception:  # noqa: BLE001 - a packet that trips a bug costs that packet only
            self._fault("packet_errors", "packet from %s" % face.label)

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
            self._on_register(face, i, nm, pkt)
            return
        our_nonce = control.fetched_nonce(nm, self.prefix)
        if our_nonce is not None:
            served = self._serve.get(our_nonce)
            if served is not None:
                face.send_packet(served)
            else:
                self._send_nack(face, pkt)
            return
        try:
            topic, publisher, nonce, fwd_hint, ni = notify.notify_parts(i, pkt)
        except DecodeError:
            topic = None
        if topic is not None:
            if self._notify_refused(face, bytes(topic), bytes(publisher), ni, pkt):
                return  # rejected (counted and logged by the policy)
            inline = notify.inline_msg(ni)
            self._spawn(self._on_notify(face, nm, bytes(topic), bytes(publisher), bytes(nonce),
                                        bytes(fwd_hint) if fwd_hint is not None else None,
                                        ni.sig_time_ms,
                                        bytes(inline) if inline is not None else None,
                                        notify.taken_ms(ni)))
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

    def _notify_refused(self, face: HubFace, topic: bytes, publisher: bytes,
                        ni: ndn_interest.Interest, pkt: bytes) -> bool:
        """Who may publish what (with a policy: the bridge always has one): a board only
        as itself, from the face it registered on; nobody as a board but that board (an
        NDN app under /pubmote/node/ neither); into a topic that requires signing, only a
        board with its key's signature; a keyed board only within its grant
        (BoardAuth.granted). True when refused (counted by the policy)."""
        if face.kind == "ndn" and not _app_may(face, topic, "a notify on"):
            return True  # outside the NDN face's ndn_allow_prefixes (counted by the face)
        auth = self.auth
        if auth is None:
            return False
        if face.kind == "ndn":
            if board_of(publisher) is not None:
                auth.reject("spoofed", board_of(publisher), "notify from NDN app %s"
                            % face.label)
                return True
            if auth.requires(topic):
                auth.reject("unsigned_ingress", None, "notify from NDN app %s on a topic "
                            "that requires signing" % face.label)
                return True
            return False
        b = self.boards.get(face.board or "")
        if b is None or b.face is not face:
            claimed = self.boards.get(board_of(publisher) or "")
            if claimed is None:
                # nobody holds that name: a board whose bridge (re)started before it
                # registered again, its buffered frames first; it retries once registered
                auth.reject("unregistered", board_of(publisher), "notify on %s, where no "
                            "board registered yet" % face.label)
            else:
                auth.reject("spoofed", board_of(publisher), "notify on %s, where no board "
                            "registered, in the name of %s (registered on %s)" % (
                                face.label, claimed.name, claimed.face.label))
            return True
        if b.prefix != publisher:
            auth.reject("spoofed", board_of(publisher), "notify on %s, where board %s "
                        "registered another prefix" % (face.label, b.name))
            return True
        if not auth.granted(b.name, topic):
            auth.reject("not_granted", b.name, "notify on %s outside its grant" %
                        ndn_name.to_uri(topic))
            return True
        if auth.requires(topic):
            return auth.interest_refusal(board_of(publisher), ni, pkt) is not None
        return False

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
        if register and not _app_may(face, prefix, "a rib/register of"):
            self.counters["rib_refused"] += 1
            self._reply(face, nm, nfd_mgmt.control_response(
                403, "outside the prefixes this face allows (ndn_allow_prefixes)", None))
            return
        if register and not self.fwd.add_route(prefix, face):
            self.counters["rib_refused"] += 1
            self._reply(face, nm, nfd_mgmt.control_response(
                403, "FIB full (%d routes, %d per face)" % (self.fwd.max_fib,
                                                           self.fwd.max_fib_per_face), None))
            return
        if not register:
            self.fwd.remove_route(prefix, face)
        topic = control.notify_topic(prefix)
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

    def _on_register(self, face: HubFace, i: ndn_interest.Interest, nm: bytes,
                     pkt: bytes) -> None:
        try:
            bname, prefix, filters, serves, offers_batch, boot = (
                control.decode_register_params(bytes(i.app_params or b"")))
        except DecodeError as e:
            self.counters["bad_packets"] += 1
            log.warning("bad registration from %s: %s", face.label, e)
            self._send_nack(face, ndn_interest.encode(nm, nonce=new_nonce()))
            return
        why = name_problem(bname)
        if why is not None:
            self.counters["bad_packets"] += 1
            log.warning("registration from %s refused: board name %r: %s", face.label,
                        bname[:80], why)
            self._send_nack(face, ndn_interest.encode(nm, nonce=new_nonce()))
            return
        auth = self.auth
        key = auth.keys.get(bname) if auth is not None else None
        if key is not None and auth is not None and auth.interest_refusal(
                bname, i, pkt, what="registration", check_time=False) is not None:
            # a board with a key registers only with it: nobody else takes its name
            auth.rejected["register_rejected"] += 1
            return
        if key is None and auth is not None and self._anonymous_refused(auth, face, bname):
            return
        # a face carries one board: a new name on it takes over from the one before
        prev = self.boards.get(face.board or "")
        if prev is not None and prev.name != bname and prev.face is face and not prev.down:
            self._mark_down(prev)
        b = self.boards.get(bname)
        if b is None:
            if len(self.boards) >= self.max_boards and not self._evict_longest_down(bname):
                self.counters["unknown_board_refused"] += 1
                self.hits.hit("max_boards", "board %s on %s refused: %d boards, all up",
                              bname, face.label, len(self.boards))
                return
            b = BoardState(bname, prefix, face, self.board_queue_len)
            self.boards[bname] = b
            log.info("board %s registered on %s", bname, face.label)
            self._journal_event("board_up", bname, face.label, reconnect=False)
        elif b.face is not face or b.prefix != prefix or b.down:
            self._drop_routes(b)
            log.info("board %s moved to %s", bname, face.label)
            self._journal_event("board_up", bname, face.label, reconnect=True)
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
                self.fwd.remove_route(p, face)
        b.routes = [p for p in wanted if self.fwd.add_route(p, face)]
        if b.worker is None or b.worker.done():
            b.worker = self._spawn(self._deliver_loop(b))
        info = b.info()
        for hook in list(self._register_hooks):
            try:
                hook(info)
            except Exception:  # noqa: BLE001 - a broken hook must not break a registration
                self._fault("hook_errors", "register hook")
        b.wake.set()
        # the gateway's clock, for boards without one: the taken-time of what they publish
        # (docs/protocols/event-time.md) and their signed Interests' SignatureTime; signed
        # with the board's key so the board can trust it
        content = control.reply_content(ndn_name.to_uri(self.prefix), self.clock_ms(),
                                        b.batch)
        reply = ndn_data.encode(nm, content, freshness_ms=0,
                                signer=HmacSigner(key) if key is not None else SIGNER)
        face.send_packet(reply)

    def _anonymous_refused(self, auth: BoardAuth, face: HubFace, bname: str) -> bool:
        """A board without a key registers only where anonymous boards are allowed, and
        never takes a name another connection holds: while that board is up and was heard
        in the last TAKEOVER_GRACE_S, the name is bound to its face."""
        if not auth.allow_anonymous:
            auth.reject("anonymous", bname, "registration on %s without a key" % face.label)
            return True
        b = self.boards.get(bname)
        if (b is not None and b.face is not face and not b.down and b.face.up
                and time.time() - b.last_seen < TAKEOVER_GRACE_S):
            auth.reject("takeover", bname, "registration on %s while the board is up on %s"
                        % (face.label, b.face.label))
            return True
        return False

    def _mark_down(self, b: BoardState) -> None:
        b.down = True
        b.down_since = time.monotonic()
        self._drop_routes(b)
        self._journal_event("board_down", b.name, b.face.label)

    def _drop_routes(self, b: BoardState) -> None:
        for p in b.routes:
            self.fwd.remove_route(p, b.face)
        b.routes = []

    def _evict_longest_down(self, newcomer: str) -> bool:
        """Make room in a full board table: forget the board down the longest (its queue
        is dropped, journaled); False when every board is up."""
        down = [b for b in self.boards.values() if b.down or not b.face.up]
        if not down:
            return False
        b = min(down, key=_down_since)
        del self.boards[b.name]
        self._index = None  # the filter index still holds it
        if b.worker is not None:
            b.worker.cancel()
        while b.outbox:
            self.journal_outcome(b.outbox.popleft(), b.name, "dropped")
        if b.face.board == b.name:
            b.face.board = None
        self.counters["boards_evicted"] += 1
        self.hits.hit("max_boards", "board %s (down %.0f s) forgotten to make room for %s",
                      b.name, time.monotonic() - b.down_since, newcomer)
        self._journal_event("board_evicted", b.name, b.face.label)
        return True

    # ---- the API for everyone else: events, snapshots ---------------------------------

    def add_listener(self, fn: Listener) -> None:
        """Call fn with every message the hub relays (after publish hooks)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def has_listener(self, fn: Listener) -> bool:
        return fn in self._listeners

    def add_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        """fn sees each new message before fan-out; returning True, it has taken it over."""
        self._publish_hooks.append(fn)

    def remove_publish_hook(self, fn: Callable[[Message], bool]) -> None:
        with contextlib.suppress(ValueError):
            self._publish_hooks.remove(fn)

    def add_register_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        """Call fn with a snapshot of each board as it registers or re-registers."""
        self._register_hooks.append(fn)

    def remove_register_hook(self, fn: Callable[[BoardInfo], None]) -> None:
        with contextlib.suppress(ValueError):
            self._register_hooks.remove(fn)

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

    def topic_stats(self) -> dict[bytes, TopicStats]:
        """Per-topic figures (count, rate, last value), by topic URI, for the most recently
        published topics (limit max_topics); a copy of the table."""
        return self.topics.snapshot()

    def stats(self) -> dict[str, int]:
        """The hub's counters, and the PIT's size as "pit"."""
        out = dict(self.counters)
        out["pit"] = len(self.fwd.pit)
        return out


def _down_since(b: BoardState) -> float:
    return b.down_since


def _app_may(face: HubFace, name: bytes, what: str) -> bool:
    """Whether an NDN app's face lets it publish or register under name (its listener's
    ndn_allow_prefixes, faces/ndn.py); faces without such a list always do."""
    allowed = getattr(face, "name_allowed", None)
    return allowed is None or bool(allowed(name, what))
