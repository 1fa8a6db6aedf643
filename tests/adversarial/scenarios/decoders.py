"""Hostile payloads into a running bridge whose live view draws them: every CBOR payload of
the corpus (tests/adversarial/corpus.py) on one SP topic and inside directed messages,
and malformed SP lines, the view drawn after each. Returns what the SP SUB endpoint took
and refused and what the mesh did with the directed ones."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from attackers import genuine_bridge
from corpus import CBOR, SP_MAX
from measure import Bound, Measure
from rich.console import Console

from e2e import Collector, Publisher, wait_until
from pubmote.gateway import view

from .common import scaled

MALFORMED = [b"no separator", b"no-slash|x", b"/\xff\xfe|x", b"/a%zz|x", b"|"]


def draw(bridge: Any) -> str:
    """One screen of the live view, drawn as a terminal would get it."""
    out = io.StringIO()
    Console(file=out, width=140, force_terminal=True, color_system=None).print(
        view.render(bridge))
    return out.getvalue()


async def soon(pred: Any, what: str, timeout_s: float = 20) -> None:
    """wait_until, polling every 5 ms: for one message at a time, hundreds of times."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout_s, what))
        await asyncio.sleep(0.005)


def sp_attack() -> list[tuple[str, bytes]]:
    return [(n, d) for n, d in CBOR if len(d) <= SP_MAX]


async def hostile_cbor(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """The corpus through the SP SUB endpoint (`scale` passes), plain and directed to the
    genuine board, the view drawn after each message; malformed SP lines among them."""
    m = Measure()
    attack = sp_attack()
    passes = scaled(1, scale)
    async with genuine_bridge(tmp, m) as (bridge, g):
        m.bound = Bound(bridge.cfg).sp_sub(2).topics().boards()
        sub = Collector(bridge.cfg["sp_pub"][0], b"/attack/")
        pub = Publisher(bridge.cfg["sp_sub"][0])
        drawn = 0
        try:
            ep = next(e for e in bridge.sp if e.url == bridge.cfg["sp_sub"][0])
            # the attack's own SP clients past their handshakes, beside the genuine ones
            await wait_until(lambda: all(sum(c.ready for c in e.conns) >= 2
                                         for e in bridge.sp), 10, "the attack's SP clients")
            sent, base = 0, ep.counters["received"]  # the genuine board's commands go there too
            for _ in range(passes):
                for _name, payload in attack:
                    for line in (b"/attack/sp|" + payload,
                                 b"/pubmote/to/gw/sim1|\xa2\x61t\x62/x\x61p" + payload):
                        await pub.send(line)
                        sent += 1
                        await soon(lambda n=sent: ep.counters["received"] - base >= n,
                                   "the bridge to take message %d" % sent)
                        drawn += "/attack/sp" in draw(bridge)
            for line in MALFORMED:
                await pub.send(line)
            await wait_until(lambda: ep.counters["bad_messages"] == len(MALFORMED), 10,
                             "the malformed SP lines refused")
            draw(bridge)
            received = ep.counters["received"] - base
            m.sample()
            await wait_until(lambda: len(sub.with_prefix(b"/attack/sp|")) == passes * len(attack),
                             20, "the attack relayed to the subscriber")
            await g.recovered("hostile CBOR payloads", measure=m)
            tasks_done = sum(t.done() for t in bridge._tasks)
        finally:
            sub.close()
            pub.close()
        mesh = dict(bridge.mesh.counters)
        figures = {"payloads": passes * len(attack), "sp_received": received,
                   "bad_messages": ep.counters["bad_messages"], "drawn": drawn,
                   "relayed": len(sub.with_prefix(b"/attack/sp|")),
                   "directed_bad": mesh["directed_bad"], "directed_local": mesh["directed_local"],
                   "internal_errors": bridge.internal_errors(), "tasks_done": tasks_done}
    return m.figures(**figures)
