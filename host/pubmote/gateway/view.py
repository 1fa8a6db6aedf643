"""The bridge's live terminal view (rich): boards, links, topics, rates, drops, last values."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from rich.console import Group
from rich.live import Live
from rich.table import Table

from pubmote.core import cbor

if TYPE_CHECKING:
    from pubmote.gateway.bridge import Bridge


def show_payload(payload: bytes, limit: int = 48) -> str:
    """A payload as a person wants to read it: CBOR decoded, else text, else hex."""
    try:
        text = repr(cbor.loads(payload))
    except cbor.CborError:
        try:
            text = payload.decode()
        except UnicodeDecodeError:
            text = payload.hex()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(bridge: Bridge) -> Group:
    hub = bridge.hub
    boards = Table(title="boards", expand=True)
    boards.add_column("board", no_wrap=True)
    boards.add_column("link", overflow="fold")
    boards.add_column("state", no_wrap=True)
    for col in ("pub", "recv", "drops", "bad frames"):
        boards.add_column(col, justify="right", no_wrap=True)
    boards.add_column("filters", overflow="fold")
    by_face = {b.face_id: b for b in hub.board_infos()}
    for face in bridge.all_faces():
        b = by_face.get(face.face_id)
        state = "[green]up[/]" if face.up else "[red]down[/]"
        if b is None:
            why = getattr(face, "last_error", "") if not face.up else ""
            boards.add_row("?", face.label, state + (" (%s)" % why if why else
                                                     " (not registered)"), "", "", "",
                           str(face.bad_frames()), "")
            continue
        c = b.counters
        boards.add_row(b.name, face.label, state, str(c["published"]), str(c["delivered"]),
                       str(c["dropped"] + c["deliver_failed"]), str(face.bad_frames()),
                       ", ".join(f.decode(errors="replace") or "<all>" for f in b.filters))
    topics = Table(title="topics", expand=True)
    topics.add_column("topic", overflow="fold", ratio=3)
    for col in ("msgs", "rate/s"):
        topics.add_column(col, justify="right", no_wrap=True)
    topics.add_column("last value", overflow="fold", ratio=3)
    for col in ("from", "age s"):
        topics.add_column(col, no_wrap=True)
    now = time.time()
    for topic, st in sorted(hub.topic_stats().items()):
        topics.add_row(topic.decode(errors="replace"), str(st.count), "%.1f" % st.rate,
                       show_payload(st.last_payload), st.last_origin,
                       "%.1f" % (now - st.last_time))
    sp_line = "  ".join("%s %s: %d clients, %d sent, %d dropped, %d received" % (
        "PUB" if ep.proto == 0x20 else "SUB", ep.url, ep.clients(), ep.counters["sent"],
        ep.counters["dropped"], ep.counters["received"]) for ep in bridge.sp)
    c = hub.stats()
    foot = "messages %d  bad packets %d  nacks sent %d  fetch failures %d  PIT %d" % (
        c["messages"], c["bad_packets"], c["nacks_sent"], c["fetch_failed"], c["pit"])
    parts: list[object] = [boards, topics, foot]
    parts.append("limits hit: %s  (docs/limits.md)" % bridge.limit_summary())
    if sp_line:
        parts.append(sp_line)
    parts.append("[dim]Ctrl-C stops the bridge and every simulated board.[/]")
    return Group(*parts)  # type: ignore[arg-type]


async def live_view(bridge: Bridge, refresh_s: float = 0.5) -> None:
    with Live(render(bridge), refresh_per_second=4, screen=False) as live:
        while True:
            await asyncio.sleep(refresh_s)
            live.update(render(bridge))
