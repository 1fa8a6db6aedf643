"""The bridge's producer of updates: a face in the hub's FIB for /pubmote/update that
answers boards' Interests, /pubmote/update/<board>/<v>/m with the manifest (signed with the
board's key: HmacWithSha256), .../s/<seg> with a segment (DigestSha256, FinalBlockId the
last segment), and .../r/<state>/<why> (a board's report) with an empty Data, and records
per board what it fetched and reported (BoardUpdate)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from pubmote.gateway.update.package import SEGMENT_BYTES, AppPackage
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.errors import DecodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.signature import DIGEST

log = logging.getLogger("pubmote.update")

PREFIX = ndn_name.from_uri("/pubmote/update")
TRIGGER = ndn_name.from_uri("/pubmote/ctl/update")
_SEGMENT = 0x32
FINAL = ("healthy", "rolledback", "failed", "timeout", "skipped")
_ORDER = ("queued", "offered", "fetching", "staged")


class BoardUpdate:
    """One board's part in a roll-out: state (queued, offered, fetching, staged, healthy,
    rolledback, failed, timeout, skipped), bytes fetched, why (its last error line)."""

    def __init__(self, board: str, package: AppPackage, manifest: bytes) -> None:
        self.board = board
        self.package = package
        self.manifest = manifest
        self.state = "queued"
        self.why = ""
        self.fetched: set[int] = set()
        self.served = 0  # segment Data sent (a segment fetched again counts again)
        self.heap = ""  # what the board's updater said of its heap ("heap +N B")
        self.t_start = time.monotonic()
        self.t_end: float | None = None

    @property
    def total(self) -> int:
        return len(self.package.blob)

    @property
    def bytes(self) -> int:
        n = len(self.package.blob)
        return sum(min(SEGMENT_BYTES, n - i * SEGMENT_BYTES) for i in self.fetched)

    def set(self, state: str, why: str = "") -> None:
        """Move on to state (never back: a late segment fetch after staged is no news)."""
        if self.state in FINAL or (state in _ORDER and _ORDER.index(state) < _ORDER.index(
                self.state)):
            return
        self.state = state
        if why:
            self.why = why
        if state in FINAL:
            self.t_end = time.monotonic()

    def view(self) -> dict[str, Any]:
        end = self.t_end if self.t_end is not None else time.monotonic()
        return {"board": self.board, "version": self.package.version, "state": self.state,
                "bytes": self.bytes, "total": self.total, "why": self.why,
                "heap": self.heap, "seconds": round(end - self.t_start, 1)}


class UpdateProducer:
    """Serves the updates of `updates` (board -> BoardUpdate) to the hub's boards."""

    kind = "update"
    label = "updates"

    def __init__(self, hub: Any, face_id: int,
                 on_change: Callable[[BoardUpdate], None] | None = None) -> None:
        self.hub = hub
        self.face_id = face_id
        self.up = True
        self.board: str | None = None
        self.tracer: Any = None
        self.updates: dict[str, BoardUpdate] = {}
        self.on_change = on_change
        hub.add_route(PREFIX, self)

    def close(self) -> None:
        self.hub.remove_route(PREFIX, self)

    def bad_frames(self) -> int:
        return 0

    def offer(self, board: str, package: AppPackage, timeout_s: float,
              grace_s: float) -> BoardUpdate:
        """Serve package to board from now on (replacing what it was offered before)."""
        u = BoardUpdate(board, package, package.manifest(timeout_s, grace_s))
        self.updates[board] = u
        return u

    def trigger(self, u: BoardUpdate) -> bool:
        """Tell the board to fetch its update (an Interest on its face); False when it is
        not connected."""
        nm = TRIGGER + ndn_name.generic(u.package.version.encode())
        return bool(self.hub.send_to_board(u.board, ndn_interest.encode(
            nm, nonce=int.from_bytes(os.urandom(4), "big"), lifetime_ms=1000)))

    def send_packet(self, pkt: bytes) -> None:
        """An Interest the hub forwards here; answered on the next loop turn."""
        asyncio.get_running_loop().call_soon(self._answer, pkt)

    def _answer(self, pkt: bytes) -> None:
        try:
            nm = bytes(ndn_interest.decode_interest(pkt).name)
            comps = [ndn_name.component_type_value(c) for c in ndn_name.components(nm)]
        except DecodeError:
            return
        if len(comps) < 5:
            return
        board = bytes(comps[2][1]).decode(errors="replace")
        ver = bytes(comps[3][1]).decode(errors="replace")
        what = bytes(comps[4][1])
        u = self.updates.get(board)
        if what == b"r" and len(comps) >= 6:
            if not self._from_board(nm, board):
                return  # a report for a board comes over that board's own link
            why = bytes(comps[6][1]).decode(errors="replace") if len(comps) > 6 else ""
            self._report(board, ver, bytes(comps[5][1]).decode(errors="replace"),
                         "" if why == "-" else why, u)
            self._reply(nm, b"")
            return
        if u is None or u.package.version != ver:
            return  # not offered (or no longer): the board's fetch times out
        if what == b"m":
            key = self.hub.auth.keys.get(board) if self.hub.auth is not None else None
            if key is None:
                u.set("failed", "board has no key: the manifest cannot be signed for it")
                return
            self._reply(nm, u.manifest, HmacSigner(key))
            self._moved(u, "fetching")
        elif what == b"s" and len(comps) == 6 and comps[5][0] == _SEGMENT:
            i = int.from_bytes(bytes(comps[5][1]), "big")
            if i >= u.package.segments:
                return
            self._reply(nm, u.package.segment(i), final=u.package.segments - 1)
            u.fetched.add(i)
            u.served += 1
            self._moved(u, "fetching")

    def _from_board(self, nm: bytes, board: str) -> bool:
        """Whether the Interest nm came from the face the board registered on."""
        b = self.hub.board(board)
        return b is not None and b.face_id in self.hub.waiting_faces(nm)

    def _report(self, board: str, ver: str, state: str, why: str,
                u: BoardUpdate | None) -> None:
        log.log(logging.WARNING if state in ("rolledback", "failed") else logging.INFO,
                "board %s: update %s %s%s", board, ver, state, (": " + why) if why else "")
        if u is None or u.package.version != ver:
            return
        if state == "staged":
            u.heap = why  # not an error: the updater's heap figure
            self._moved(u, state)
        elif state in ("healthy", "rolledback", "failed"):
            self._moved(u, state, why)

    def _moved(self, u: BoardUpdate, state: str, why: str = "") -> None:
        u.set(state, why)
        if self.on_change is not None:
            self.on_change(u)

    def _reply(self, nm: bytes, content: bytes, signer: Any = DIGEST,
               final: int | None = None) -> None:
        pkt = ndn_data.encode(nm, content, freshness_ms=0, signer=signer,
                              final_block_id=ndn_name.segment(final) if final is not None
                              else None)
        self.hub.satisfy(nm, pkt, self)
