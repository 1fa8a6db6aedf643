"""Tables a peer grows by naming things: topics (through the SP SUB endpoint and from a
board's link batches), boards (fake registrations under ever new names, from one
connection and from several) and routes (registrations serving many prefixes). Each
table stays within its limit, what it evicts or refuses is counted, a new genuine board
can always register, and no refusal closes anybody's connection. A genuine simulated
board is served (its readings reach an SP subscriber, a command published to it through
SP reaches it) during each attack and within 10 s of the attackers leaving."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from attackers import (
    ATTACKERS,
    Genuine,
    Memory,
    Peer,
    close_all,
    open_conns,
    registration,
    rib_register,
)
from rich.console import Console

from e2e import boards_registered, bridge_with_boards, free_port, sp_connected, wait_until
from pubmote.boards.sim import SimBoard
from pubmote.gateway.view import render
from pubmote_wire import batch, cbor, control, framing, sp
from pubmote_wire import name as ndn_name

RECOVERY_S = 10.0


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 120) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout_s))


def _urls(**more: object) -> dict[str, object]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()], **more}


def _batch_frames(first: int, count: int, per_frame: int = 10) -> bytes:
    """Link batches of `count` records, each to a topic of its own."""
    out = []
    for start in range(first, first + count, per_frame):
        buf = bytearray(1024)
        off = batch.begin(buf, batch.BATCH, 77)
        for seq in range(start, min(start + per_frame, first + count)):
            off = batch.add_record(buf, off, seq, ndn_name.from_uri("/bflood/t%d" % seq),
                                   b"%d" % seq, False)
        out.append(framing.encode(bytes(buf[:off])))
    return b"".join(out)


def _batching_board(board: str) -> bytes:
    params = cbor.dumps({"name": board, "prefix": "/pubmote/node/" + board, "filters": [],
                         "serve": [], "batch": 1})
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, board.encode(), params, -1, 1500, None, None, None)
    return bytes(framing.encode(bytes(buf[:n])))


def test_unique_topics_keep_the_topic_table_bounded(tmp_path: Path) -> None:
    """5,000 unique topics through the SP SUB endpoint and 5,000 from a fake board's link
    batches: the per-topic table keeps the most recent max_topics, evictions counted, and
    the heap grows by about max_topics entries, not 10,000."""
    async def body() -> None:
        port = free_port()
        urls = _urls(tcp=["127.0.0.1:%d" % port], max_topics=256)
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            hub = bridge.hub
            mem = Memory()
            peers: list[Peer] = []
            pub = None
            try:
                await sp_connected(bridge)
                await g.served(20)
                flood = b"".join(sp.encode_msg(b"/flood/t%d|x" % i) for i in range(5000))
                frames = _batch_frames(0, 5000)
                start = hub.counters["messages"]
                mem.start()
                pub = socket.create_connection(
                    ("127.0.0.1", int(str(urls["sp_sub"][0]).rsplit(":", 1)[1])),  # type: ignore[index]
                    source_address=(ATTACKERS[0], 0))
                pub.setblocking(False)
                await asyncio.get_running_loop().sock_sendall(pub, sp.header(sp.PUB) + flood)
                peers = await open_conns(port, ATTACKERS[1:2], 1, _batching_board("fakeb"))
                await wait_until(lambda: hub.board("fakeb") is not None, 30, "the fake board")
                peers[0].write(frames)
                await wait_until(lambda: hub.counters["messages"] - start >= 10_000, 30,
                                 "the 10,000 flood messages (%d)"
                                 % (hub.counters["messages"] - start))
                await g.served()
                grown = mem.grown_kb()
                topics = len(hub.topic_stats())
                print("topic flood: 10,000 topics, %d kept, heap +%d KiB" % (topics, grown))
                assert topics <= 256, topics
                assert grown < 2048, "10,000 topics grew the heap by %d KiB" % grown
                close_all(peers)
                pub.close()
                await g.recovered("topic flood")
            finally:
                mem.stop()
                close_all(peers)
                if pub is not None:
                    pub.close()
                g.close()
            assert bridge.hits.counts["max_topics"] >= 10_000 - 256
            assert "max_topics" in bridge.status()
            console = Console(record=True, width=200)
            console.print(render(bridge))  # the live view's footer shows it too
            footer = [x for x in console.export_text().splitlines() if "limits hit:" in x]
            assert footer and "max_topics" in footer[0], footer

    run(body)


def test_fake_registrations_never_lock_new_boards_out(tmp_path: Path) -> None:
    """320 fake board names registered over TCP (80 from each of 4 connections, more than
    the table holds): the table stays within max_boards, a board that comes up during the
    attack registers (the longest-down names make room), and nothing already up goes."""
    async def body() -> None:
        port = free_port()
        urls = _urls(tcp=["127.0.0.1:%d" % port], max_boards=64)
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            hub = bridge.hub
            peers: list[Peer] = []
            late = SimBoard("sim5", tmp_path, period_ms=200)
            try:
                await sp_connected(bridge)
                await g.served(20)
                for k in range(4):
                    regs = b"".join(registration("fake%d_%d" % (k, i)) for i in range(80))
                    peers += await open_conns(port, ATTACKERS[:1], 1, regs)
                await wait_until(lambda: hub.counters["unknown_board_refused"]
                                 + hub.counters.get("boards_evicted", 0) > 0, 10,
                                 "the board table to fill")
                assert len(hub.board_names()) <= 64, len(hub.board_names())
                await g.served()
                late.start()  # a new board, while the attackers are still connected
                bridge.add_serial(late.port)
                await boards_registered(bridge, ["sim5"], timeout_s=RECOVERY_S)
                await Genuine(bridge, "sim5").served(RECOVERY_S)
                assert hub.board("sim1").up
                close_all(peers)
                await g.recovered("fake registrations")
            finally:
                late.stop()
                close_all(peers)
                g.close()
            assert len(hub.board_names()) <= 64
            assert bridge.hits.counts["max_boards"] > 0

    run(body)


def test_route_floods_are_refused_and_counted_not_raised(tmp_path: Path) -> None:
    """Fake boards register names serving 8 prefixes each until the FIB is full (from one
    connection, then from four): routes beyond a face's share or the FIB are refused and
    counted, never an exception, and a WiFi board that connects meanwhile registers and
    is served, its connection untouched."""
    async def body() -> None:
        port = free_port()
        ndn = free_port()
        urls = _urls(tcp=["127.0.0.1:%d" % port], ndn_face=["tcp://127.0.0.1:%d" % ndn],
                     fib_max=48, fib_max_per_face=16)
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            hub = bridge.hub
            peers: list[Peer] = []
            late = SimBoard("sim7", tmp_path, period_ms=200,
                            extra={"link": "tcp", "host": "127.0.0.1", "port": port})
            try:
                await sp_connected(bridge)
                await g.served(20)
                # an NDN app registering 100 prefixes of its own
                app = b"".join(rib_register("/app/p%d" % i) for i in range(100))
                peers += await open_conns(ndn, ATTACKERS[2:3], 1, app)
                await wait_until(lambda: hub.counters["rib_commands"] >= 100, 10,
                                 "the app's registrations")
                # names of 9 routes each and one of the rest: exactly what 1,024 routes
                # (the FIB before limits were configurable) leave room for
                room = 1024 - len(hub.fwd.fib)
                regs = b"".join(registration("r%d" % i, serves=8) for i in range(room // 9))
                if room % 9:
                    regs += registration("rlast", serves=room % 9 - 1)
                peers += await open_conns(port, ATTACKERS[:1], 1, regs)
                for k in range(3):
                    more = b"".join(registration("s%d_%d" % (k, i), serves=8) for i in range(20))
                    peers += await open_conns(port, ATTACKERS[1:2], 1, more)
                await wait_until(lambda: hub.board("s2_19") is not None
                                 or hub.board("r%d" % (room // 9 - 1)) is not None, 10,
                                 "the fake routes")
                assert len(hub.fwd.fib) <= 1024
                late.start()
                await boards_registered(bridge, ["sim7"], timeout_s=RECOVERY_S)
                face = next(f for f in bridge.faces if f.board == "sim7")
                await Genuine(bridge, "sim7").served(RECOVERY_S)
                assert face.up and face.counters["opens"] == 1
                assert hub.board("sim7").registrations >= 1
                await g.served()
                close_all(peers)
                await g.recovered("route flood")
                assert face.up and face.counters["opens"] == 1  # never closed, never redialled
            finally:
                late.stop()
                close_all(peers)
                g.close()
            assert hub.counters["internal_errors"] == 0
            hits = bridge.hits.counts
            assert hits["fib_max_per_face"] > 0 and hits["fib_max"] > 0

    run(body)
