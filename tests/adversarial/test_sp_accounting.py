"""What the SP PUB endpoint says it did with each message matches what its subscribers'
sockets took: a subscriber still in its SP handshake misses what is relayed meanwhile,
and each miss is counted and journaled "dropped"; a message is journaled "delivered"
only once its bytes have left the host, so a subscriber that reads nothing and resets
shows what it never got as "dropped", each message once. A genuine simulated board is
served (its readings reach an SP subscriber, a command published to it through SP
reaches it) throughout."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from attackers import Genuine

from e2e import boards_registered, bridge_with_boards, free_port, sp_connected, wait_until
from pubmote_wire import sp

N = 1000


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 120) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout_s))


def _urls(tmp: Path) -> dict[str, Any]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()], "journal": str(tmp / "journal")}


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _outcomes(journal: Path, egress: str, topic_prefix: str) -> dict[str, int]:
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


def _egress(s: socket.socket) -> str:
    host, port = s.getsockname()[:2]
    return "sp:%s:%d" % (host, port)


def test_messages_missed_in_the_handshake_are_counted_drops(tmp_path: Path) -> None:
    async def body() -> None:
        urls = _urls(tmp_path)
        async with bridge_with_boards(tmp_path / "b", 1, period_ms=200, **urls,
                                      sp_handshake_timeout_s=30.0) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            pub_ep = next(ep for ep in bridge.sp if ep.proto == sp.PUB)
            late = socket.create_connection(("127.0.0.1", _port(urls["sp_pub"][0])))
            src = None
            try:
                await sp_connected(bridge)
                await wait_until(lambda: pub_ep.clients() == 2, 30, "the late subscriber")
                await g.served(20)
                before = pub_ep.counters["dropped"]
                src = await _publish(_port(urls["sp_sub"][0]), b"/acct/hs", 3 * N, b"x")
                await wait_until(lambda: bridge.hub.counters["messages"] > 3 * N, 20,
                                 "the messages relayed")
                missed = pub_ep.counters["dropped"] - before
                assert missed >= 3 * N, "%d of %d messages missed in the handshake counted" \
                    % (missed, 3 * N)
                await wait_until(lambda: _outcomes(Path(urls["journal"]), _egress(late),
                                                   "/acct/hs/").get("dropped", 0) == 3 * N,
                                 30, "3,000 journaled drops")
                # it finishes its handshake: from then on it gets what is relayed
                late.sendall(sp.header(sp.SUB))
                late_conn = next(c for c in pub_ep.conns if c.peer.endswith(
                    ":%d" % late.getsockname()[1]))
                await wait_until(lambda: late_conn.ready, 30, "the late handshake")
                src.send(sp.encode_msg(b"/acct/after|1"))
                late.settimeout(5)
                got = b""
                while b"/acct/after|1" not in got:
                    got += await asyncio.get_running_loop().run_in_executor(
                        None, late.recv, 65536)
                await g.served()
            finally:
                late.close()
                if src is not None:
                    src.close()
                g.close()
            assert pub_ep.counters["dropped_handshake"] >= 3 * N

    run(body)


def test_delivered_means_written_and_a_reset_subscribers_losses_are_drops(
        tmp_path: Path) -> None:
    async def body() -> None:
        urls = _urls(tmp_path)
        async with bridge_with_boards(tmp_path / "b", 1, period_ms=200, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            pub_ep = next(ep for ep in bridge.sp if ep.proto == sp.PUB)
            mute = socket.socket()
            mute.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect
            mute.connect(("127.0.0.1", _port(urls["sp_pub"][0])))
            mute.sendall(sp.header(sp.SUB))
            mute_egress = _egress(mute)
            reader = socket.socket()  # a subscriber that reads everything
            reader.connect(("127.0.0.1", _port(urls["sp_pub"][0])))
            reader.sendall(sp.header(sp.SUB))
            reader.setblocking(False)
            journal = Path(urls["journal"])
            src = None
            try:
                await sp_connected(bridge)
                await wait_until(lambda: sum(c.ready for c in pub_ep.conns) == 3, 30,
                                 "the two raw subscribers' handshakes")
                await g.served(20)
                start = bridge.hub.counters["messages"]
                src = await _publish(_port(urls["sp_sub"][0]), b"/acct/w", N, b"p" * 200)
                await wait_until(lambda: bridge.hub.counters["messages"] >= start + N, 20,
                                 "the messages relayed")
                loop = asyncio.get_running_loop()
                read = 0
                while read < N:  # the reader takes all of them
                    chunk = await loop.sock_recv(reader, 1 << 16)
                    assert chunk, "the bridge closed the reading subscriber"
                    read += chunk.count(b"/acct/w/")
                await wait_until(lambda: _outcomes(journal, _egress(reader), "/acct/w/").get(
                    "delivered", 0) == N, 5, "the reader's messages journaled delivered")
                # the mute one resets, having read nothing
                mute.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                mute.close()
                await wait_until(lambda: pub_ep.clients() == 2, 30, "the reset to be seen")
                got = _outcomes(journal, mute_egress, "/acct/w/")
                print("a subscriber that read nothing and reset: %s" % got)
                assert got.get("delivered", 0) + got.get("dropped", 0) == N, got
                assert got.get("delivered", 0) < N // 4, got
                await g.served()
            finally:
                for s in (mute, reader):
                    s.close()
                if src is not None:
                    src.close()
                g.close()
            assert pub_ep.counters["dropped_lost"] >= N - N // 4

    run(body)
