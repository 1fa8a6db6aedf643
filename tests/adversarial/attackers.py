"""What the resource-limit tests attack with and what they check: hostile peers on
loopback (connections from other loopback addresses than 127.0.0.1, so that a per-address
cap tells them from the genuine peers; fake boards speaking the board link), and a
genuine simulated board served through it all: its readings reach an SP subscriber, a
command published to it through SP reaches it (its echo comes back), and every reading
it saw acked reaches that subscriber."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

from measure import RECOVERY_S, Measure

from e2e import Collector, Publisher, boards_registered, bridge_with_boards, free_port, sp_connected
from faults import _acked_arrive
from pubmote.core import nfd_mgmt
from pubmote_wire import cbor, control, framing, interest, name, sp, tlv

# the attackers' own addresses: all of 127.0.0.0/8 is loopback on Linux
ATTACKERS = ["127.0.0.%d" % i for i in range(2, 12)]


class Genuine:
    """The genuine board `board` as an SP user sees it: the demo app (readings on
    .../temperature, commands echoed on .../ack), or with acked_log a probe board
    (tests/host/board_apps/probe_app.py: numbered readings on .../seq, each one it saw
    acked logged in acked_log; commands echoed on .../ctl-done)."""

    def __init__(self, bridge: Any, board: str = "sim1", acked_log: Path | None = None) -> None:
        self.board = board
        self.acked_log = acked_log
        if acked_log is None:
            self.base = b"/pubmote/demo/%s/" % board.encode()
            self.readings, self.command, self.echo = (self.base + b"temperature|",
                                                      self.base + b"command|", self.base + b"ack|")
        else:
            self.base = b"/test/%s/" % board.encode()
            self.readings, self.command, self.echo = (self.base + b"seq|", self.base + b"ctl|",
                                                      self.base + b"ctl-done|")
        self.col = Collector(bridge.cfg["sp_pub"][0], self.base)
        self.pub = Publisher(bridge.cfg["sp_sub"][0])
        self.commands = 0

    async def served(self, timeout_s: float = 10.0) -> float:
        """Wait until a new reading arrives and a new command's echo comes back; return
        the seconds it took (AssertionError after timeout_s). SP PUB/SUB keeps nothing for
        a subscriber that is not there yet, so the command is sent again each second."""
        t0 = time.monotonic()
        readings = len(self.col.with_prefix(self.readings))
        self.commands += 1
        cmd = b"check-%d" % self.commands
        ack = self.echo + cmd
        sent_at = -1.0
        while True:
            now = time.monotonic()
            got = len(self.col.with_prefix(self.readings)) > readings
            if got and ack in self.col.lines:
                return now - t0
            if now - t0 > timeout_s:
                raise AssertionError("genuine board not served within %.0f s (reading: %s, "
                                     "command echo: %s)" % (timeout_s, got,
                                                            ack in self.col.lines))
            if now - sent_at >= 1.0:
                await self.pub.send(self.command + cmd)
                sent_at = now
            await asyncio.sleep(0.05)

    async def recovered(self, what: str, within_s: float = RECOVERY_S,
                        measure: Measure | None = None) -> float:
        """Served again within within_s of the attackers leaving: the seconds it took."""
        took = await self.served(within_s)
        print("%s: genuine board served again %.1f s after the attackers left" % (what, took))
        if measure is not None:
            measure.recovered(took)
        return took

    async def acked_lost(self, bridge: Any) -> tuple[int, list[int]]:
        """Power the probe board off, wait for what it saw acked to arrive: (acked, lost)."""
        assert self.acked_log is not None and bridge.fleet is not None
        next(b for b in bridge.fleet.boards if b.name == self.board).power_off()
        acked, lost = await _acked_arrive(self.col, self.readings, self.acked_log)
        return len(acked), lost

    def close(self) -> None:
        self.col.close()
        self.pub.close()


def sp_urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


@contextlib.asynccontextmanager
async def genuine_bridge(tmp: Path, m: Measure, **cfg: Any) -> AsyncIterator[tuple[Any, Genuine]]:
    """A bridge (SP endpoints on free ports unless cfg names them) with one genuine probe
    board, sim1, publishing every 100 ms; yields once the board is registered and served,
    with m.before() taken. At the end: m's `after` and the board's acked and lost."""
    cfg = {**sp_urls(), **cfg}
    extra = {"seq_period_ms": 100, "acked_log": "acked-sim1.log", **cfg.pop("extra", {})}
    async with bridge_with_boards(tmp, 1, app="probe_app", period_ms=200, extra=extra,
                                  **cfg) as bridge:
        await boards_registered(bridge, ["sim1"])
        g = Genuine(bridge, acked_log=tmp / "acked-sim1.log")
        try:
            await sp_connected(bridge)
            await g.served(20)
            m.before()
            yield bridge, g
            m.sample()
            m.acked_figures(*await g.acked_lost(bridge))
        finally:
            g.close()


def run(scenario: Awaitable[dict[str, Any]], timeout_s: float = 120) -> dict[str, Any]:
    """A scenario's figures (tests/adversarial/scenarios), within timeout_s."""
    return asyncio.run(asyncio.wait_for(scenario, timeout_s))


def genuine_served(r: dict[str, Any]) -> None:
    """What every attack must leave true: the genuine board saw messages acked and none of
    them lost, it was served again within RECOVERY_S of the attacker leaving, and the
    bridge's memory peaked within the bound its limits imply."""
    assert r["acked"] and r["acked_lost"] == 0, "%s of %s acked lost, e.g. %s" % (
        r["acked_lost"], r["acked"], r["lost_examples"])
    assert r["recovery_s"] is not None and r["recovery_s"] <= RECOVERY_S, r["recovery_s"]
    assert r["within_bound"], "RSS %s -> %s kB, more than the %s kB its limits imply (%s)" % (
        r["rss_before_kb"], r["rss_peak_kb"], r["bound_kb"], r["bound"])


class Peer(asyncio.Protocol):
    """One hostile connection: writes what it is told, reads and keeps nothing."""

    def __init__(self) -> None:
        self.t: asyncio.Transport | None = None
        self.closed = False  # by the other side (closed or reset)
        self.received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def data_received(self, data: bytes) -> None:
        self.received += len(data)

    def eof_received(self) -> bool:
        self.closed = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        if self.t is not None and not self.closed:
            self.t.write(data)


async def open_conns(port: int, sources: list[str], per_source: int,
                     first: bytes = b"") -> list[Peer]:
    """per_source TCP connections from each address in `sources` to 127.0.0.1:port,
    writing `first` on each; those that fail to open are left out."""
    loop = asyncio.get_running_loop()
    out = []
    for src in sources:
        for _ in range(per_source):
            try:
                _, peer = await asyncio.wait_for(loop.create_connection(
                    Peer, "127.0.0.1", port, local_addr=(src, 0)), 5)
            except (OSError, TimeoutError):
                continue
            if first:
                peer.write(first)
            out.append(peer)
    return out


def alive(peers: list[Peer]) -> int:
    """How many of these connections the other side has neither closed nor reset."""
    return sum(1 for p in peers if not p.closed)


def close_all(peers: list[Peer]) -> None:
    for p in peers:
        if p.t is not None:
            p.t.abort()


def registration(board: str, serves: int = 0) -> bytes:
    """A board's registration Interest, framed for a board link (TCP, UDP)."""
    params = cbor.dumps({"name": board, "prefix": "/pubmote/node/" + board, "filters": [],
                         "serve": ["/pubmote/serve/%s/%d" % (board, i) for i in range(serves)]})
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, board.encode(), params, -1, 1500, None, None, None)
    return bytes(framing.encode(bytes(buf[:n])))


def _tlv(typ: int, value: bytes) -> bytes:
    buf = bytearray(tlv.tl_size(typ, len(value)))
    tlv.write_tlv(buf, 0, typ, value)
    return bytes(buf)


def rib_register(prefix: str) -> bytes:
    """NFD's rib/register command for `prefix` (what python-ndn's register sends), for
    the NDN face."""
    params = _tlv(nfd_mgmt.CONTROL_PARAMETERS, _tlv(0x07, name.from_uri(prefix)))
    return interest.encode(nfd_mgmt.RIB_REGISTER + name.generic(params),
                           nonce=int.from_bytes(os.urandom(4), "big"), lifetime_ms=4000)


def sp_raw(port: int, proto: int, source: str = "127.0.0.1") -> socket.socket:
    """A blocking SP client socket (PUB or SUB) that has sent its SP header."""
    s = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
    s.sendall(sp.header(proto))
    return s


class Memory:
    """The Python heap this process (bridge included) grew by since start(), through
    tracemalloc: what stays allocated, not what the allocator keeps cached."""

    def start(self) -> None:
        tracemalloc.start()
        self.base = tracemalloc.get_traced_memory()[0]

    def grown_kb(self) -> int:
        return (tracemalloc.get_traced_memory()[0] - self.base) // 1024

    def stop(self) -> None:
        tracemalloc.stop()
