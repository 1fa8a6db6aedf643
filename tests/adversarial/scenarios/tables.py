"""Tables a peer grows by naming things: topics (through the SP SUB endpoint and a board's
link batches), boards (fake registrations under ever new names), routes (registrations
serving many prefixes) and the PIT (hostile NDN apps' Interests, one name under ever new
nonces). Each returns what the table held, what was counted, the heap's growth and how
soon the genuine board was served again."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from attackers import (
    ATTACKERS,
    Genuine,
    Memory,
    Peer,
    close_all,
    genuine_bridge,
    open_conns,
    registration,
    rib_register,
)
from measure import RECOVERY_S, Bound, Measure
from rich.console import Console

from e2e import boards_registered, free_port, wait_until
from pubmote.boards.sim import SimBoard
from pubmote.gateway.view import render
from pubmote_wire import batch, cbor, control, framing, interest, name, sp

from .common import port_of, scaled

HOUR_MS = 3_600_000
# the lifetime cap long enough that a loaded machine takes in every flooder's Interests
# before the first ones end (the default's 10 s)
PIT_CAPS = {"pit_max": 512, "pit_max_per_face": 128, "pit_max_lifetime_ms": 10_000,
            "pit_max_nonces": 8, "ndn_max_apps_per_ip": 8}


def _batch_frames(first: int, count: int, per_frame: int = 10) -> bytes:
    """Link batches of `count` records, each to a topic of its own."""
    out = []
    for start in range(first, first + count, per_frame):
        buf = bytearray(1024)
        off = batch.begin(buf, batch.BATCH, 77)
        for seq in range(start, min(start + per_frame, first + count)):
            off = batch.add_record(buf, off, seq, name.from_uri("/bflood/t%d" % seq),
                                   b"%d" % seq, False)
        out.append(framing.encode(bytes(buf[:off])))
    return b"".join(out)


def _batching_board(board: str) -> bytes:
    params = cbor.dumps({"name": board, "prefix": "/pubmote/node/" + board, "filters": [],
                         "serve": [], "batch": 1})
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, board.encode(), params, -1, 1500, None, None, None)
    return bytes(framing.encode(bytes(buf[:n])))


async def topic_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """5,000 unique topics through the SP SUB endpoint and 5,000 from a fake board's link
    batches: the per-topic table keeps the most recent max_topics, evictions counted."""
    m = Measure()
    count = scaled(5000, scale)
    port = free_port()
    cfg = {"tcp": ["127.0.0.1:%d" % port], "max_topics": 256}
    mem = Memory()
    peers: list[Peer] = []
    pub = None
    async with genuine_bridge(tmp, m, **cfg) as (bridge, g):
        m.bound = Bound(bridge.cfg).topics().sp_sub(1).tcp().boards()
        hub = bridge.hub
        try:
            flood = b"".join(sp.encode_msg(b"/flood/t%d|x" % i) for i in range(count))
            frames = _batch_frames(0, count)
            start = hub.counters["messages"]
            m.before()  # the attack's bytes are ours, not the bridge's
            mem.start()
            # the batching board registers first: with the flood already queued, a loaded
            # machine can take longer than the register timeout (10 s) to read its
            # registration, and the bridge rightly closes a connection that named no board
            peers = await open_conns(port, ATTACKERS[1:2], 1, _batching_board("fakeb"))
            await wait_until(lambda: hub.board("fakeb") is not None, 120, "the fake board")
            pub = socket.create_connection(("127.0.0.1", port_of(bridge.cfg["sp_sub"][0])),
                                           source_address=(ATTACKERS[0], 0))
            pub.setblocking(False)
            await asyncio.get_running_loop().sock_sendall(pub, sp.header(sp.PUB) + flood)
            peers[0].write(frames)
            await wait_until(lambda: hub.counters["messages"] - start >= 2 * count,
                             30 * scale, "the %d flood messages (%d)"
                             % (2 * count, hub.counters["messages"] - start))
            await g.served()
            grown = mem.grown_kb()
            m.sample()
            topics = len(hub.topic_stats())
            print("topic flood: %d topics, %d kept, heap +%d KiB" % (2 * count, topics, grown))
            close_all(peers)
            pub.close()
            await g.recovered("topic flood", measure=m)
            status = bridge.status()
        finally:
            mem.stop()
            close_all(peers)
            if pub is not None:
                pub.close()
        console = Console(record=True, width=200)
        console.print(render(bridge))  # the live view's footer
        footer = [x for x in console.export_text().splitlines() if "limits hit:" in x]
    return m.figures(topics_sent=2 * count, topics_kept=topics, heap_grown_kb=grown,
                     hits=dict(bridge.hits.counts), status=status, view_footer=footer)


async def fake_registrations(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """Fake board names registered over TCP, 80 from each of 4 connections (more than the
    table holds): the table stays within max_boards, a board that comes up during the
    attack registers (the longest-down names make room), and nothing already up goes."""
    m = Measure()
    per_conn = scaled(80, scale)
    port = free_port()
    peers: list[Peer] = []
    late = SimBoard("sim5", tmp, period_ms=200)
    late_g = None
    async with genuine_bridge(tmp, m, tcp=["127.0.0.1:%d" % port], max_boards=64) as (bridge, g):
        m.bound = Bound(bridge.cfg).boards().tcp()
        hub = bridge.hub
        try:
            for k in range(4):
                regs = b"".join(registration("fake%d_%d" % (k, i)) for i in range(per_conn))
                peers += await open_conns(port, ATTACKERS[:1], 1, regs)
            await wait_until(lambda: hub.counters["unknown_board_refused"]
                             + hub.counters.get("boards_evicted", 0) > 0, 10,
                             "the board table to fill")
            boards_held = len(hub.board_names())
            await g.served()
            late.start()  # a new board, while the attackers are still connected
            bridge.add_serial(late.port)
            await boards_registered(bridge, ["sim5"], timeout_s=RECOVERY_S)
            late_g = Genuine(bridge, "sim5")
            late_served_s = await late_g.served(RECOVERY_S)
            genuine_up = hub.board("sim1").up
            m.sample()
            close_all(peers)
            await g.recovered("fake registrations", measure=m)
        finally:
            late.stop()
            close_all(peers)
            if late_g is not None:
                late_g.close()
    return m.figures(names_sent=4 * per_conn, boards_held=boards_held,
                     boards_at_end=len(hub.board_names()), late_served_s=round(late_served_s, 2),
                     genuine_up=genuine_up, hits=dict(bridge.hits.counts))


async def route_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """Fake boards register names serving 8 prefixes each until the FIB is full (from one
    connection, then from four), an NDN app registers 100 prefixes: routes beyond a
    face's share or the FIB are refused and counted, never an exception, and a WiFi
    board that connects meanwhile registers and is served, its connection untouched."""
    m = Measure()
    port, ndn = free_port(), free_port()
    app_routes = scaled(100, scale)
    peers: list[Peer] = []
    late = SimBoard("sim7", tmp, period_ms=200,
                    extra={"link": "tcp", "host": "127.0.0.1", "port": port})
    late_g = None
    async with genuine_bridge(tmp, m, tcp=["127.0.0.1:%d" % port],
                              ndn_face=["tcp://127.0.0.1:%d" % ndn], fib_max=48,
                              fib_max_per_face=16) as (bridge, g):
        m.bound = Bound(bridge.cfg).fib().boards().tcp().ndn()
        hub = bridge.hub
        try:
            app = b"".join(rib_register("/app/p%d" % i) for i in range(app_routes))
            peers += await open_conns(ndn, ATTACKERS[2:3], 1, app)
            await wait_until(lambda: hub.counters["rib_commands"] >= app_routes, 10 * scale,
                             "the app's registrations")
            # names of 9 routes each and one of the rest: exactly what 1,024 routes (the
            # FIB before limits were configurable) leave room for
            room = 1024 - len(hub.fwd.fib)
            regs = b"".join(registration("r%d" % i, serves=8) for i in range(room // 9))
            if room % 9:
                regs += registration("rlast", serves=room % 9 - 1)
            peers += await open_conns(port, ATTACKERS[:1], 1, regs)
            more_names = scaled(20, scale)
            for k in range(3):
                more = b"".join(registration("s%d_%d" % (k, i), serves=8)
                                for i in range(more_names))
                peers += await open_conns(port, ATTACKERS[1:2], 1, more)
            await wait_until(lambda: hub.board("s2_%d" % (more_names - 1)) is not None
                             or hub.board("r%d" % (room // 9 - 1)) is not None, 10 * scale,
                             "the fake routes")
            fib = len(hub.fwd.fib)
            late.start()
            await boards_registered(bridge, ["sim7"], timeout_s=RECOVERY_S)
            face = next(f for f in bridge.faces if f.board == "sim7")
            late_g = Genuine(bridge, "sim7")
            late_served_s = await late_g.served(RECOVERY_S)
            late_face = {"up": face.up, "opens": face.counters["opens"],
                         "registrations": hub.board("sim7").registrations}
            await g.served()
            m.sample()
            close_all(peers)
            await g.recovered("route flood", measure=m)
            late_face_after = {"up": face.up, "opens": face.counters["opens"]}
        finally:
            late.stop()
            close_all(peers)
            if late_g is not None:
                late_g.close()
    return m.figures(fib=fib, late_face=late_face, late_face_after=late_face_after,
                     late_served_s=round(late_served_s, 2),
                     internal_errors=hub.counters["internal_errors"],
                     hits=dict(bridge.hits.counts))


def _flood(prefix: str, count: int, lifetime_ms: int = HOUR_MS) -> bytes:
    return b"".join(interest.encode("%s/%d" % (prefix, i), nonce=i + 1, lifetime_ms=lifetime_ms)
                    for i in range(count))


async def _producer(port: int) -> list[Peer]:
    """An app that registers /evil and never answers what is forwarded to it."""
    prod = await open_conns(port, ATTACKERS[:1], 1, rib_register("/evil"))
    await wait_until(lambda: prod[0].received > 0, 30, "the rib/register reply")
    return prod


async def pit_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """Five flooders, 160 one-hour Interests each (more than their share and, together,
    more than the PIT holds), toward an app that never answers: commands to the board are
    still delivered; the flooders' entries go when they disconnect; when they stay, their
    entries end at the lifetime cap."""
    m = Measure()
    per_flooder = scaled(160, scale)
    port = free_port()
    attackers: list[Peer] = []
    mem = Memory()
    async with genuine_bridge(tmp, m, ndn_face=["tcp://127.0.0.1:%d" % port],
                              **PIT_CAPS) as (bridge, g):
        m.bound = Bound(bridge.cfg).pit().ndn()
        fwd = bridge.hub.fwd
        try:
            floods = [_flood("/evil/%d" % k, per_flooder) for k in range(5)]
            m.before()
            mem.start()
            attackers += await _producer(port)
            for k in range(5):
                attackers += await open_conns(port, [ATTACKERS[1 + k % 2]], 1, floods[k])
            # every flooder's Interests in: the per-face quota and the PIT's own cap hit
            await wait_until(lambda: fwd.counters["pit_full"] > 0
                             and fwd.counters["pit_face_quota"] > 0, 60, "the PIT to fill")
            grown = mem.grown_kb()
            print("PIT flood: %d entries, heap +%d KiB" % (len(fwd.pit), grown))
            await g.served(15)  # commands to the board are delivered all the same
            pit_full = len(fwd.pit)
            m.sample()
            close_all(attackers)
            # what the flooders put in the PIT leaves with them, not in an hour
            await wait_until(lambda: len(fwd.pit) < 16, RECOVERY_S, "the attackers' PIT "
                             "entries to go with their faces (%d left)" % len(fwd.pit))
            await g.recovered("PIT flood", measure=m)
            # they come back and stay: their Interests live no longer than the cap
            attackers = await _producer(port)
            attackers += await open_conns(port, ATTACKERS[1:2], 1, _flood("/evil/x", 100))
            await wait_until(lambda: len(fwd.pit) >= 100, 30, "the second flood")
            # an hour-long Interest ends at the 10 s cap: well before the hour
            await wait_until(lambda: len(fwd.pit) < 16, 10 + RECOVERY_S, "the one-hour "
                             "Interests to expire at the 10 s cap")
            await g.served()
        finally:
            mem.stop()
            close_all(attackers)
    return m.figures(interests_sent=5 * per_flooder, pit_under_flood=pit_full,
                     heap_grown_kb=grown, hits=dict(bridge.hits.counts))


async def pit_nonces(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """One name under 5,000 nonces, each aggregated into the pending entry: the entry
    keeps the last few, and the heap does not grow with the nonces."""
    m = Measure()
    count = scaled(5000, scale)
    port = free_port()
    attackers: list[Peer] = []
    mem = Memory()
    async with genuine_bridge(tmp, m, ndn_face=["tcp://127.0.0.1:%d" % port],
                              **PIT_CAPS) as (bridge, g):
        m.bound = Bound(bridge.cfg).pit().ndn()
        fwd = bridge.hub.fwd
        try:
            attackers += await _producer(port)
            same = b"".join(interest.encode("/evil/same", nonce=n + 1, lifetime_ms=HOUR_MS)
                            for n in range(count))
            m.before()
            mem.start()
            attackers += await open_conns(port, ATTACKERS[2:3], 1, same)
            kept = [0]

            def nonces_seen() -> bool:
                entry = fwd.pit.get(name.from_uri("/evil/same"))
                kept[0] = max(kept[0], len(entry.nonces) if entry is not None else 0)
                return bool(fwd.counters["aggregated"] >= count - 100)

            await wait_until(nonces_seen, 30 * scale, "the nonce flood (%d aggregated)"
                             % fwd.counters["aggregated"])
            grown = mem.grown_kb()
            del same
            print("nonce flood: at most %d nonces kept, heap +%d KiB" % (kept[0], grown))
            await g.served()
            m.sample()
            close_all(attackers)
            await g.recovered("nonce flood", measure=m)
        finally:
            mem.stop()
            close_all(attackers)
    return m.figures(nonces_sent=count, nonces_kept=kept[0], heap_grown_kb=grown,
                     hits=dict(bridge.hits.counts))
