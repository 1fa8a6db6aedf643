"""The bridge's live terminal view (rich): boards, links, topics, rates, drops, last values,
the SP, NDN, mesh and DHT figures, and the bridge's last warnings.

Most of what it shows comes from peers (payloads, topics, board and gateway names), so it
is shown as plain text, never as rich markup, with control characters escaped; a payload
is decoded only up to SHOW_DECODE_MAX bytes. A row that still fails to render is counted
and shown as such, and a render that fails keeps the last good screen: the view never
ends the bridge.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pubmote.core import cbor
from pubmote.core.display import printable
from pubmote.gateway.recent import RecentWarnings
from pubmote.gateway.status import asleep_note, board_problems, network_parts

if TYPE_CHECKING:
    from pubmote.gateway.bridge import Bridge

log = logging.getLogger("pubmote.view")

# A last value longer than this is shown as its first bytes in hex, not decoded: the view
# redraws every topic twice a second
SHOW_DECODE_MAX = 4096


def show_payload(payload: bytes, limit: int = 48) -> str:
    """A payload as a person wants to read it: CBOR decoded, else text, else hex; at most
    `limit` characters, printable. Never raises (cbor.loads raises only CborError)."""
    if len(payload) > SHOW_DECODE_MAX:
        text = "%d B: %s" % (len(payload), payload[:limit].hex())
    else:
        try:
            text = repr(cbor.loads(payload))
        except cbor.CborError:
            try:
                text = payload.decode()
            except UnicodeDecodeError:
                text = payload[:limit].hex()
    text = printable(text[:limit])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _t(s: Any) -> Text:
    """A table cell of peer-supplied text: plain, never parsed as markup."""
    return Text(printable(str(s)))


def _board_row(boards: Table, face: Any, b: Any, crash: str | None, bridge: Bridge) -> None:
    """The row of one face: b is its registered board (None: not yet), crash what a
    simulated board's app died of (None: alive); a board's part in the last roll-out is
    said beside its state."""
    state = Text("up", style="green") if face.up else Text("down", style="red")
    if crash is not None:  # a simulated board whose app died (it may have registered first)
        state = Text(printable(crash), style="red")
    if b is None:
        if crash is None:
            why = getattr(face, "last_error", "") if not face.up else ""
            state.append(" (%s)" % printable(str(why)) if why else " (not registered)")
        boards.add_row("?", _t(face.label), state, "", "", "", str(face.bad_frames()), "")
        return
    note = asleep_note(b)
    if note is not None and crash is None:  # its session kept (docs/protocols/sleep.md)
        state = Text(note, style="yellow")
    _update_note(bridge, b.name, state)
    c = b.counters
    boards.add_row(_t(b.name), _t(face.label), state, str(c["published"]),
                   str(c["delivered"]), str(c["dropped"] + c["deliver_failed"]),
                   str(face.bad_frames()),
                   _t(", ".join(f.decode(errors="replace") or "<all>" for f in b.filters)))


def _sp_line(bridge: Bridge) -> str:
    # refused: connections (caps, sp_sub_allow_from) and messages (sp_sub_allow_topics,
    # --require-signed)
    return "  ".join("%s %s: %d clients, %d sent, %d dropped, %d received, %d bad, %d "
                     "refused" % (
        "PUB" if ep.proto == 0x20 else "SUB", ep.url, ep.clients(), ep.counters["sent"],
        ep.counters["dropped"], ep.counters["received"],
        ep.counters["bad_messages"] + ep.counters["bad_streams"],
        ep.admission.refused + ep.allow.refused_source + ep.allow.refused_name
        + ep.counters["refused"]) for ep in bridge.sp)


class View:
    """The live view of one bridge, and the count of what it failed to show."""

    def __init__(self, bridge: Bridge, recent: RecentWarnings | None = None) -> None:
        self.bridge = bridge
        self.recent = recent
        self.counters = {"renders": 0, "row_errors": 0, "render_errors": 0}

    def _row_failed(self, table: Table, what: str, ncols: int) -> None:
        self.counters["row_errors"] += 1
        n = self.counters["row_errors"]
        if n == 1 or n % 1000 == 0:
            log.exception("view: a row of %s failed to render (%d so far)", what, n)
        table.add_row(Text("(row not shown: error)", style="red"), *[""] * (ncols - 1))

    def render(self) -> Group:
        bridge = self.bridge
        parts: list[Any] = [self._boards(), self._topics(), Text(self._foot())]
        sp_line = _sp_line(bridge)
        if sp_line:
            parts.append(Text(sp_line))
        net = network_parts(bridge)
        if net:
            parts.append(Text(printable("  ".join(net))))
        if self.bridge.journal is not None:
            parts.append(Text(self.bridge.journal.status_line()))
        parts.append(Text("limits hit: %s  (docs/limits.md)" % self.bridge.limit_summary()))
        if self.recent is not None:
            parts.append(self._warnings(self.recent))
        parts.append("[dim]Ctrl-C stops the bridge and every simulated board.[/]")
        self.counters["renders"] += 1
        return Group(*parts)

    def _boards(self) -> Table:
        """A row per face: its board (or why there is none yet) and its counters."""
        bridge = self.bridge
        boards = Table(title="boards", expand=True)
        boards.add_column("board", no_wrap=True)
        boards.add_column("link", overflow="fold")
        boards.add_column("state", no_wrap=True)
        for col in ("pub", "recv", "drops", "bad frames"):
            boards.add_column(col, justify="right", no_wrap=True)
        boards.add_column("filters", overflow="fold")
        by_face = {b.face_id: b for b in bridge.hub.board_infos()}
        problems = board_problems(bridge)
        faces = bridge.all_faces()
        for face in faces:
            try:
                _board_row(boards, face, by_face.get(face.face_id), problems.get(face.face_id),
                           self.bridge)
            except Exception:  # noqa: BLE001 - one row must not take the view down
                self._row_failed(boards, "boards", 8)
        # a board asleep whose link closed when it went (a WiFi board): its session is kept
        shown = {f.face_id for f in faces}
        for b in by_face.values():
            note = asleep_note(b)
            if note is not None and b.face_id not in shown:
                boards.add_row(_t(b.name), _t(b.face_label), Text(note, style="yellow"),
                               str(b.counters["published"]), str(b.counters["delivered"]),
                               str(b.counters["dropped"] + b.counters["deliver_failed"]), "",
                               "")
        return boards

    def _topics(self) -> Table:
        topics = Table(title="topics", expand=True)
        topics.add_column("topic", overflow="fold", ratio=3)
        for col in ("msgs", "rate/s"):
            topics.add_column(col, justify="right", no_wrap=True)
        topics.add_column("last value", overflow="fold", ratio=3)
        for col in ("from", "age s"):
            topics.add_column(col, no_wrap=True)
        now = time.time()
        for topic, st in sorted(self.bridge.hub.topic_stats().items()):
            try:
                topics.add_row(_t(topic.decode(errors="replace")), str(st.count),
                               "%.1f" % st.rate, Text(show_payload(st.last_payload)),
                               _t(st.last_origin), "%.1f" % (now - st.last_time))
            except Exception:  # noqa: BLE001 - one row must not take the view down
                self._row_failed(topics, "topics", 6)
        return topics

    def _foot(self) -> str:
        c = self.bridge.hub.stats()
        foot = "messages %d  bad packets %d  nacks sent %d  fetch failures %d  PIT %d" % (
            c["messages"], c["bad_packets"], c["nacks_sent"], c["fetch_failed"], c["pit"])
        errors = (self.bridge.internal_errors() + self.counters["row_errors"]
                  + self.counters["render_errors"])
        if errors:
            foot += "  internal errors %d (see the log)" % errors
        return foot

    @staticmethod
    def _warnings(recent: RecentWarnings) -> Text:
        """The last warnings, oldest first, as plain text (they quote peers' input)."""
        lines = recent.lines()
        if not lines:
            return Text("last warnings: none", style="dim")
        out = Text("last warnings (%d of %d; all of them in the log):" % (
            len(lines), recent.seen), style="yellow")
        for line in lines:
            out.append("\n  " + line, style="red" if " ERROR " in line else None)
        return out

    def render_safely(self, last: Group | None) -> Group:
        """render(), or on a failure (counted, logged) the last good screen."""
        try:
            return self.render()
        except Exception:  # the view must never end the bridge
            self.counters["render_errors"] += 1
            n = self.counters["render_errors"]
            if n == 1 or n % 1000 == 0:
                log.exception("view: rendering failed (%d so far)", n)
            return last if last is not None else Group(Text("(view failed: see the log)"))

    async def run(self, refresh_s: float = 0.5, console: Console | None = None) -> None:
        """Redraw every refresh_s until cancelled (on console, default the terminal)."""
        screen = self.render_safely(None)
        with Live(screen, console=console, refresh_per_second=4, screen=False) as live:
            while True:
                await asyncio.sleep(refresh_s)
                screen = self.render_safely(screen)
                live.update(screen)


def _update_note(bridge: Bridge, board: str, state: Text) -> None:
    """A board's part in the last roll-out (`pubmote update`): its state and bytes."""
    control = bridge.control
    u = control.producer.updates.get(board) if control is not None else None
    if u is None:
        return
    style = {"healthy": "green", "rolledback": "red", "failed": "red", "timeout": "red",
             "skipped": "yellow"}.get(u.state, "cyan")
    note = " update %s" % u.state
    if u.state in ("offered", "fetching"):
        note += " %d/%d B" % (u.bytes, u.total)
    state.append(note, style=style)


def render(bridge: Bridge, recent: RecentWarnings | None = None) -> Group:
    """One screen of the view (a fresh View: its error counts start at 0)."""
    return View(bridge, recent).render()


async def live_view(bridge: Bridge, refresh_s: float = 0.5, console: Console | None = None,
                    recent: RecentWarnings | None = None) -> None:
    """Redraw the view of `bridge` until cancelled; `recent` feeds its last warnings."""
    await View(bridge, recent).run(refresh_s, console)
