"""The bridge's NDN forwarding core: FIB (longest-prefix match) and PIT (exact match,
aggregation, timeouts). Faces and the pub/sub hub sit on top of it; it does no I/O."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from pubmote_wire import name as ndn_name


class Face(Protocol):
    """What the forwarder needs of a face: an id, a label and a way to send a packet."""

    face_id: int
    label: str

    def send_packet(self, pkt: bytes) -> None: ...


DataSink = Callable[[bytes | None, int | None], None]
"""An internal consumer of a PIT entry: called with (the Data packet, None), or on no Data
with (None, the NackReason of a Nack, or None for a timeout or a full PIT)."""


class PitEntry:
    __slots__ = ("name", "expires", "in_faces", "sinks", "nonces", "timer")

    def __init__(self, name: bytes, expires: float) -> None:
        self.name = name
        self.expires = expires
        self.in_faces: dict[int, Face] = {}
        self.sinks: list[DataSink] = []
        self.nonces: set[int] = set()
        self.timer: asyncio.TimerHandle | None = None


class Forwarder:
    """FIB and PIT with bounds: at most `max_pit` pending Interests, of which one face may
    hold `max_pit_per_face` (a flooding app cannot starve the others), and `max_fib` routes."""

    def __init__(self, *, max_pit: int = 4096, max_pit_per_face: int = 1024,
                 max_fib: int = 1024) -> None:
        self.fib: dict[bytes, dict[int, Face]] = {}
        self.pit: dict[bytes, PitEntry] = {}
        self.max_pit = max_pit
        self.max_pit_per_face = max_pit_per_face
        self.max_fib = max_fib
        self._pending_by_face: dict[int, int] = {}
        self.counters = {"pit_full": 0, "pit_face_quota": 0, "pit_timeouts": 0,
                         "aggregated": 0, "loops": 0, "unsolicited_data": 0, "no_route": 0}

    # ---- FIB ------------------------------------------------------------------------

    def add_route(self, prefix: bytes, face: Face) -> None:
        if prefix not in self.fib and len(self.fib) >= self.max_fib:
            raise ValueError("FIB full (%d routes)" % self.max_fib)
        self.fib.setdefault(bytes(prefix), {})[face.face_id] = face

    def remove_route(self, prefix: bytes, face: Face) -> None:
        hops = self.fib.get(bytes(prefix))
        if hops is not None:
            hops.pop(face.face_id, None)
            if not hops:
                del self.fib[bytes(prefix)]

    def remove_face(self, face: Face) -> None:
        for prefix in list(self.fib):
            self.remove_route(prefix, face)
        for entry in self.pit.values():
            entry.in_faces.pop(face.face_id, None)
        self._pending_by_face.pop(face.face_id, None)

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
                    *, face: Face | None = None, sink: DataSink | None = None) -> bool:
        """Record an Interest; return True if it must be forwarded (a new entry), False if
        it was aggregated into a pending one or dropped (duplicate nonce = loop, PIT full)."""
        now = time.monotonic()
        if face is not None and self._pending_by_face.get(face.face_id, 0) >= self.max_pit_per_face:
            self.counters["pit_face_quota"] += 1
            return False
        entry = self.pit.get(full_name)
        is_new = entry is None
        if entry is not None:
            if nonce is not None and nonce in entry.nonces:
                self.counters["loops"] += 1
                return False
            self.counters["aggregated"] += 1
        else:
            if len(self.pit) >= self.max_pit:
                self.counters["pit_full"] += 1
                if sink is not None:
                    sink(None, None)
                return False
            entry = PitEntry(full_name, now + lifetime_ms / 1000)
            self.pit[full_name] = entry
            loop = asyncio.get_running_loop()
            entry.timer = loop.call_later(lifetime_ms / 1000, self._expire, full_name)
        if nonce is not None:
            entry.nonces.add(nonce)
        if face is not None and face.face_id not in entry.in_faces:
            entry.in_faces[face.face_id] = face
            self._pending_by_face[face.face_id] = self._pending_by_face.get(face.face_id, 0) + 1
        if sink is not None:
            entry.sinks.append(sink)
        return is_new

    def _release(self, entry: PitEntry) -> None:
        for fid in entry.in_faces:
            left = self._pending_by_face.get(fid, 0) - 1
            if left > 0:
                self._pending_by_face[fid] = left
            else:
                self._pending_by_face.pop(fid, None)

    def _expire(self, full_name: bytes) -> None:
        entry = self.pit.pop(full_name, None)
        if entry is None:
            return
        self._release(entry)
        self.counters["pit_timeouts"] += 1
        for sink in entry.sinks:
            sink(None, None)

    def satisfy(self, data_name: bytes, pkt: bytes, from_face: Face | None) -> bool:
        """Send Data to every requester of the exact name; False if nobody asked for it."""
        entry = self.pit.pop(bytes(data_name), None)
        if entry is None:
            self.counters["unsolicited_data"] += 1
            return False
        if entry.timer is not None:
            entry.timer.cancel()
        self._release(entry)
        for fid, face in entry.in_faces.items():
            if from_face is None or fid != from_face.face_id:
                face.send_packet(pkt)
        for sink in entry.sinks:
            sink(pkt, None)
        return True

    def nack(self, full_name: bytes, reason: int) -> PitEntry | None:
        """Remove a pending entry after a Nack; internal sinks hear (None, reason)."""
        entry = self.pit.pop(bytes(full_name), None)
        if entry is None:
            return None
        if entry.timer is not None:
            entry.timer.cancel()
        self._release(entry)
        for sink in entry.sinks:
            sink(None, reason)
        return entry

    def close(self) -> None:
        for entry in self.pit.values():
            if entry.timer is not None:
                entry.timer.cancel()
        self.pit.clear()
