"""SP subscribers that would make the PUB endpoint's accounting mislead: one that stays in
its SP handshake while messages are relayed, one that reads nothing and resets. Each
returns what the endpoint counted and journaled for it, beside what its socket took."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from pathlib import Path
from typing import Any

from attackers import genuine_bridge
from measure import Bound, Measure

from e2e import wait_until
from pubmote_wire import sp

from .common import port_of, scaled


def outcomes(journal: Path, egress: str, topic_prefix: str) -> dict[str, int]:
    """Outcome -> count of the journal's records for egress and topics under the prefix."""
    out: dict[str, int] = {}
    for f in journal.iterdir():
        for line in f.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the line being written
            if rec.get("egress") == egress and str(rec.get("topic", "")).startswith(topic_prefix):
                out[rec["outcome"]] = out.get(rec["outcome"], 0) + 1
    return out


async def _publish(port: int, topic: bytes, count: int, payload: bytes) -> socket.socket:
    """count messages into the SUB endpoint from a raw SP PUB socket (left open)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    data = b"".join(sp.encode_msg(b"%s/%d|%s" % (topic, i, payload)) for i in range(count))
    await asyncio.get_running_loop().sock_sendall(s, sp.header(sp.PUB) + data)
    return s


def egress(s: socket.socket) -> str:
    host, port = s.getsockname()[:2]
    return "sp:%s:%d" % (host, port)


async def sp_handshake(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """A subscriber connects and stays in its SP handshake while 3,000 messages are
    relayed: each miss is counted a drop and journaled "dropped"; once it finishes its
    handshake it gets what is relayed from then on."""
    m = Measure()
    count = scaled(3000, scale)
    journal = tmp / "journal"
    src = None
    async with genuine_bridge(tmp / "b", m, journal=str(journal),
                              sp_handshake_timeout_s=30.0) as (bridge, g):
        m.bound = Bound(bridge.cfg).sp_pub(2).sp_sub(2).journal()
        pub_ep = next(ep for ep in bridge.sp if ep.proto == sp.PUB)
        late = socket.create_connection(("127.0.0.1", port_of(bridge.cfg["sp_pub"][0])))
        try:
            await wait_until(lambda: pub_ep.clients() == 2, 30, "the late subscriber")
            before = pub_ep.counters["dropped"]
            start = bridge.hub.counters["messages"]
            src = await _publish(port_of(bridge.cfg["sp_sub"][0]), b"/acct/hs", count, b"x")
            await wait_until(lambda: bridge.hub.counters["messages"] >= start + count,
                             20 * scale, "the messages relayed")
            missed = pub_ep.counters["dropped"] - before
            await wait_until(lambda: outcomes(journal, egress(late), "/acct/hs/").get(
                "dropped", 0) >= count, 30 * scale, "%d journaled drops" % count)
            journaled = outcomes(journal, egress(late), "/acct/hs/")
            m.sample()
            # it finishes its handshake: from then on it gets what is relayed
            late.sendall(sp.header(sp.SUB))
            late_conn = next(c for c in pub_ep.conns
                             if c.peer.endswith(":%d" % late.getsockname()[1]))
            await wait_until(lambda: late_conn.ready, 30, "the late handshake")
            src.send(sp.encode_msg(b"/acct/after|1"))
            late.settimeout(5)
            got = b""
            while b"/acct/after|1" not in got:
                got += await asyncio.get_running_loop().run_in_executor(None, late.recv, 65536)
            await g.recovered("subscriber in its handshake", measure=m)
        finally:
            late.close()
            if src is not None:
                src.close()
    return m.figures(relayed=count, missed_counted=missed, journaled=journaled,
                     dropped_handshake=pub_ep.counters["dropped_handshake"])


async def sp_reset(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """1,000 messages of 1 KB to a subscriber that reads everything and to one that reads
    nothing and resets, its kernel and transport buffers holding some: "delivered" only
    for what left the host, the rest "dropped", each message once."""
    m = Measure()
    count = scaled(1000, scale)
    journal = tmp / "journal"
    src = None
    # messages of 1 KB: more than the kernel's send buffer (512 KiB) takes, so that the
    # mute one's transport still holds some at the reset; a burst the reader's buffers
    # hold whole (a larger one would overrun even a reader that reads: counted drops,
    # but not this scenario's point)
    payload = b"p" * 1000
    room = {"sp_buffer_bytes": max(1 << 20, 2 * count * (len(payload) + 100)),
            "sp_max_unconfirmed": max(8192, 2 * count)}
    async with genuine_bridge(tmp / "b", m, journal=str(journal), **room) as (bridge, g):
        m.bound = Bound(bridge.cfg).sp_pub(3).sp_sub(2).journal()
        pub_ep = next(ep for ep in bridge.sp if ep.proto == sp.PUB)
        port = port_of(bridge.cfg["sp_pub"][0])
        mute = socket.socket()
        mute.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
        reader = socket.socket()  # a subscriber that reads everything
        try:
            mute.connect(("127.0.0.1", port))
            mute.sendall(sp.header(sp.SUB))
            mute_egress = egress(mute)
            reader.connect(("127.0.0.1", port))
            reader.sendall(sp.header(sp.SUB))
            reader.setblocking(False)
            await wait_until(lambda: sum(c.ready for c in pub_ep.conns) == 3, 30,
                             "the two raw subscribers' handshakes")
            start = bridge.hub.counters["messages"]
            src = await _publish(port_of(bridge.cfg["sp_sub"][0]), b"/acct/w", count, payload)
            await wait_until(lambda: bridge.hub.counters["messages"] >= start + count,
                             20 * scale, "the messages relayed")
            loop = asyncio.get_running_loop()
            read, tail = 0, b""
            deadline = loop.time() + 30 * scale
            while read < count:  # the reader takes all of them
                assert loop.time() < deadline, "the reader got %d of %d" % (read, count)
                chunk = await asyncio.wait_for(loop.sock_recv(reader, 1 << 16),
                                               deadline - loop.time())
                assert chunk, "the bridge closed the reading subscriber"
                # a topic split between two reads is counted once, in the second
                data = tail + chunk
                read += data.count(b"/acct/w/")
                tail = data[-(len(b"/acct/w/") - 1):]
            await wait_until(lambda: outcomes(journal, egress(reader), "/acct/w/").get(
                "delivered", 0) == count, 5 * scale, "the reader's messages journaled delivered")
            reader_journaled = outcomes(journal, egress(reader), "/acct/w/")
            # the mute one resets, having read nothing
            mute.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            mute.close()
            await wait_until(lambda: pub_ep.clients() == 2, 30, "the reset to be seen")
            mute_journaled = outcomes(journal, mute_egress, "/acct/w/")
            print("a subscriber that read nothing and reset: %s" % mute_journaled)
            m.sample()
            await g.recovered("subscriber that reset", measure=m)
        finally:
            for s in (mute, reader):
                s.close()
            if src is not None:
                src.close()
    return m.figures(relayed=count, reader_journaled=reader_journaled,
                     mute_journaled=mute_journaled, dropped_lost=pub_ep.counters["dropped_lost"])
