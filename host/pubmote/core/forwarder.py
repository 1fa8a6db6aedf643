"""The bridge's NDN forwarding core: FIB (longest-prefix match) and PIT (exact match,
aggregation, timeouts). Faces and the pub/sub hub sit on top of it; it does no I/O.

Both tables are bounded in total and per face (docs/limits.md), and what a face put in
them leaves with it: its routes, its in-records, and the entries only it was waiting for.
Interests from faces and the hub's own (its fetches from boards, its deliveries to them)
fill separate pools, so Interests from apps and boards can never crowd out the hub's
delivery of commands to boards."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from pubmote.core.limits import LimitHits, Limits
from pubmote_wire import name as ndn_name


class Face(Protocol):
    """What the forwarder needs of a face: an id, a label and a way to send a packet."""

    face_id: int
    label: str

    def send_packet(self, pkt: bytes) -> None: ...


DataSink = Callable[[bytes | None, int | None], None]
"""An internal consumer of a PIT entry: called with (the Data packet, None), or on no Data
with (None, the NackReason of a Nack, or None for a timeout or a refusal by a bound)."""


class PitEntry:
    __slots__ = ("name", "expires", "in_faces", "sinks", "nonces", "timer", "holders",
                 "internal")

    def __init__(self, name: bytes, expires: float, internal: bool) -> None:
        self.name = name
        self.expires = expires
        self.in_faces: dict[int, Face] = {}
        self.sinks: list[DataSink] = []
        self.nonces: list[int] = []  # the last few (max_nonces), oldest first
        self.timer: asyncio.TimerHandle | None = None
        # the faces whose share of the PIT this entry counts in: those it came from, and
        # those on whose behalf the hub asked
        self.holders: set[int] = set()
        self.internal = internal  # the hub's own Interest: counted in its own pool


class Forwarder:
    """FIB and PIT with bounds: `max_pit` pending Interests from faces and as many of the
    hub's own, of which one face may hold `max_pit_per_face`; lifetimes capped at
    `max_lifetime_ms`; the last `max_nonces` nonces per entry; `max_fib` routes, of which
    one face may register `max_fib_per_face`."""

    def __init__(self, *, max_pit: int = Limits.pit_max,
                 max_pit_per_face: int = Limits.pit_max_per_face,
                 max_fib: int = Limits.fib_max, max_fib_per_face: int = Limits.fib_max_per_face,
                 max_lifetime_ms: int = Limits.pit_max_lifetime_ms,
                 max_nonces: int = Limits.pit_max_nonces, hits: LimitHits | None = None) -> None:
        self.fib: dict[bytes, dict[int, Face]] = {}
        self.pit: dict[bytes, PitEntry] = {}
        self.max_pit = max_pit
        self.max_pit_per_face = max_pit_per_face
        self.max_fib = max_fib
        self.max_fib_per_face = max_fib_per_face
        self.max_lifetime_ms = max_lifetime_ms
        self.max_nonces = max_nonces
        self.hits = hits if hits is not None else LimitHits()
        self._routes_by_face: dict[int, set[bytes]] = {}
        self._by_face: dict[int, set[bytes]] = {}  # names each face is waiting for / owns
        self._internal = 0  # entries in the hub's own pool
        self.counters = {"pit_full": 0, "pit_face_quota": 0, "pit_timeouts": 0,
                         "aggregated": 0, "loops": 0, "unsolicited_data": 0, "no_route": 0,
                         "fib_full": 0, "pit_face_gone": 0}

    # ---- FIB ------------------------------------------------------------------------

    def add_route(self, prefix: bytes, face: Face) -> bool:
        """Add a next hop for prefix; False (counted) when the FIB or the face's share of
        it is full."""
        prefix = bytes(prefix)
        mine = self._routes_by_face.get(face.face_id)
        if mine is not None and prefix in mine:
            return True
        if mine is not None and len(mine) >= self.max_fib_per_face:
            self.counters["fib_full"] += 1
            self.hits.hit("fib_max_per_face", "a route of %s refused", face.label)
            return False
        if prefix not in self.fib and len(self.fib) >= self.max_fib:
            self.counters["fib_full"] += 1
            self.hits.hit("fib_max", "a route of %s refused", face.label)
            return False
        self.fib.setdefault(prefix, {})[face.face_id] = face
        self._routes_by_face.setdefault(face.face_id, set()).add(prefix)
        return True

    def remove_route(self, prefix: bytes, face: Face) -> None:
        prefix = bytes(prefix)
        hops = self.fib.get(prefix)
        if hops is not None:
            hops.pop(face.face_id, None)
            if not hops:
                del self.fib[prefix]
        mine = self._routes_by_face.get(face.face_id)
        if mine is not None:
            mine.discard(prefix)
            if not mine:
                del self._routes_by_face[face.face_id]

    def remove_face(self, face: Face) -> None:
        """A face went down: its routes go, and its part in the PIT (an entry that only it
        was waiting for goes with it)."""
        fid = face.face_id
        for prefix in list(self._routes_by_face.get(fid, ())):
            self.remove_route(prefix, face)
        for name in self._by_face.pop(fid, ()):
            entry = self.pit.get(name)
            if entry is None:
                continue
            entry.in_faces.pop(fid, None)
            entry.holders.discard(fid)
            if not entry.in_faces and not entry.sinks:
                self._drop(entry)
                self.counters["pit_face_gone"] += 1

    def lookup(self, full_name: bytes) -> list[Face]:
        """Longest-prefix match: the next hops of the longest registered prefix."""
        best: dict[int, Face] | None = None
        best_len = -1
        for prefix, hops in self.fib.items():
            if len(prefix) > best_len and ndn_name.is_prefix(prefix, full_name):
                best, best_len = hops, len(prefix)
        return list(best.values()) if best else []

    # ---- PIT ------------------------------------------------------------------------

    def add_pending(self, full_name: bytes, nonce: int | None, lifetime_ms: int,
                    *, face: Face | None = None, sink: DataSink | None = None,
                    owner: Face | None = None) -> bool:
        """Record an Interest from `face`, or the hub's own with its `sink` (on behalf of
        `owner`, whose share of the PIT it counts in); return True if it must be forwarded
        (a new entry), False if it was aggregated into a pending one or refused (duplicate
        nonce = loop, a bound reached: the sink then hears (None, None) at once)."""
        holder = face if face is not None else owner
        hid = holder.face_id if holder is not None else None
        held = self._by_face.get(hid) if hid is not None else None
        if held is not None and full_name not in held and len(held) >= self.max_pit_per_face:
            assert holder is not None
            self.counters["pit_face_quota"] += 1
            self.hits.hit("pit_max_per_face", "an Interest of %s refused", holder.label)
            return self._refused(sink)
        entry = self.pit.get(full_name)
        is_new = entry is None
        if entry is not None:
            if nonce is not None and nonce in entry.nonces:
                self.counters["loops"] += 1
                return self._refused(sink)
            self.counters["aggregated"] += 1
        else:
            internal = face is None
            if (self._internal if internal else len(self.pit) - self._internal) >= self.max_pit:
                self.counters["pit_full"] += 1
                self.hits.hit("pit_max", "an Interest of %s refused",
                              holder.label if holder is not None else "the hub")
                return self._refused(sink)
            if lifetime_ms > self.max_lifetime_ms:
                lifetime_ms = self.max_lifetime_ms
                self.hits.hit("pit_max_lifetime_ms", "a lifetime capped")
            entry = PitEntry(full_name, time.monotonic() + lifetime_ms / 1000, internal)
            self.pit[full_name] = entry
            self._internal += internal
            entry.timer = asyncio.get_running_loop().call_later(lifetime_ms / 1000,
                                                                self._expire, full_name)
        if nonce is not None:
            nonces = entry.nonces
            if len(nonces) >= self.max_nonces:
                del nonces[0]  # loops are caught within the last few; older ones forgotten
                self.hits.hit("pit_max_nonces", "an entry's oldest nonce forgotten")
            nonces.append(nonce)
        if hid is not None:
            self._by_face.setdefault(hid, set()).add(full_name)
            entry.holders.add(hid)
        if face is not None:
            entry.in_faces[face.face_id] = face
        if sink is not None:
            entry.sinks.append(sink)
        return is_new

    @staticmethod
    def _refused(sink: DataSink | None) -> bool:
        if sink is not None:
            sink(None, None)
        return False

    def _drop(self, entry: PitEntry) -> None:
        """Take entry out of the PIT and out of every face's share."""
        if self.pit.get(entry.name) is entry:
            del self.pit[entry.name]
            self._internal -= entry.internal
        if entry.timer is not None:
            entry.timer.cancel()
        for fid in entry.holders:
            held = self._by_face.get(fid)
            if held is not None:
                held.discard(entry.name)
                if not held:
                    del self._by_face[fid]

    def _expire(self, full_name: bytes) -> None:
        entry = self.pit.get(full_name)
        if entry is None:
            return
        entry.timer = None
        self._drop(entry)
        self.counters["pit_timeouts"] += 1
        for sink in entry.sinks:
            sink(None, None)

    def satisfy(self, data_name: bytes, pkt: bytes, from_face: Face | None) -> bool:
        """Send Data to every requester of the exact name; False if nobody asked for it."""
        entry = self.pit.get(bytes(data_name))
        if entry is None:
            self.counters["unsolicited_data"] += 1
            return False
        self._drop(entry)
        for fid, face in entry.in_faces.items():
            if from_face is None or fid != from_face.face_id:
                face.send_packet(pkt)
        for sink in entry.sinks:
            sink(pkt, None)
        return True

    def nack(self, full_name: bytes, reason: int) -> PitEntry | None:
        """Remove a pending entry after a Nack; internal sinks hear (None, reason)."""
        entry = self.pit.get(bytes(full_name))
        if entry is None:
            return None
        self._drop(entry)
        for sink in entry.sinks:
            sink(None, reason)
        return entry

    def pending_of(self, face: Face) -> int:
        """How many PIT entries `face` holds (its in-records and the hub's Interests on its
        behalf)."""
        return len(self._by_face.get(face.face_id, ()))

    def close(self) -> None:
        for entry in self.pit.values():
            if entry.timer is not None:
                entry.timer.cancel()
        self.pit.clear()
        self._by_face.clear()
        self._internal = 0
