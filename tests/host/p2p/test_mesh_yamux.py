"""Yamux: streams, flow control, ping, go-away, resets, and peers that break the rules
(window violations, stream floods, bad frames): the connection closes with a logged
reason, the process and the host go on, and buffers stay bounded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

import pytest
from mesh_util import addr_of, echo_handler, frame, make_host, raw_secured, read_frames_until_eof

from e2e import wait_until
from pubmote.p2p import MeshError, Stream, StreamReset, multistream
from pubmote.p2p.yamux import (
    FLAG_ACK,
    FLAG_RST,
    FLAG_SYN,
    INITIAL_WINDOW,
    TYPE_DATA,
    TYPE_GO_AWAY,
    TYPE_PING,
    TYPE_WINDOW_UPDATE,
    YamuxConfig,
)

LOGGER = "pubmote.p2p"


def run(coro: Coroutine[Any, Any, None], timeout_s: float = 20.0) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout_s))


def _assert_logged(caplog: pytest.LogCaptureFixture, *words: str) -> None:
    msgs = [r.getMessage() for r in caplog.records]
    assert any(all(w in m for w in words) for m in msgs), msgs


def test_echo_many_streams_and_large_transfer() -> None:
    async def go() -> None:
        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/echo", echo_handler)
            await a.connect(addr_of(b))

            async def one(i: int, size: int) -> None:
                st = await a.new_stream(b.peer_id, ["/echo"])
                data = bytes([i & 0xFF]) * size
                w = asyncio.ensure_future(st.write(data))
                assert await st.readexactly(size) == data
                await w
                await st.close()
                assert await st.read() == b""

            await asyncio.gather(*(one(i, 1000) for i in range(100)))
            await one(7, 5 * 1024 * 1024)
            conn = a.connection(b.peer_id)
            assert conn is not None and conn.session.stream_count == 0

    run(go())


def test_flow_control_blocks_the_writer_and_bounds_the_buffer() -> None:
    async def go() -> None:
        gate = asyncio.Event()
        seen: list[Stream] = []

        async def slow(st: Stream) -> None:
            seen.append(st)
            await gate.wait()
            total = len(await st.read_until_eof(10 * 1024 * 1024))
            await st.write(total.to_bytes(8, "big"))
            await st.close()

        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/slow", slow)
            await a.connect(addr_of(b))
            st = await a.new_stream(b.peer_id, ["/slow"])
            writer = asyncio.ensure_future(st.write(bytes(1024 * 1024)))
            await wait_until(lambda: st.send_window == 0 and bool(seen), 10,
                             "the writer to use up the stream's window")
            assert not writer.done()                 # blocked on the window
            assert 0 < seen[0].buffered <= INITIAL_WINDOW   # bounded by the window
            gate.set()
            await asyncio.wait_for(writer, 5)
            await st.close()
            assert int.from_bytes(await st.readexactly(8), "big") == 1024 * 1024

    run(go())


def test_window_violation_closes_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async def never_reads(st: Stream) -> None:
            await asyncio.sleep(30)

        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/sleep", never_reads)
            # a buggy peer, Yamux by hand: it opens a stream for /sleep, then sends twice
            # the receive window in 64 KiB frames, never waiting for a window update
            sec = await raw_secured(b)
            hello = multistream.encode_message(multistream.PROTOCOL_ID) \
                + multistream.encode_message("/sleep")
            await sec.write(frame(TYPE_DATA, FLAG_SYN, 1, len(hello), hello))
            chunk = 64 * 1024
            with contextlib.suppress(ConnectionError):  # b may hang up while we write
                for _ in range(2 * INITIAL_WINDOW // chunk):
                    await sec.write(frame(TYPE_DATA, 0, 1, chunk, bytes(chunk)))
            await read_frames_until_eof(sec)      # b hangs up
            assert b.connected_peers() == []
            await a.connect(addr_of(b))           # the host serves on
            assert await a.ping(b.peer_id)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "closing connection", "receive window")


def test_data_frame_larger_than_any_window(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host(identify_on_connect=False) as h:
            sec = await raw_secured(h)
            # header only: the host must not wait to buffer 16 MiB
            await sec.write(frame(TYPE_DATA, FLAG_SYN, 1, 16 * 1024 * 1024))
            frames = await read_frames_until_eof(sec)
            assert (TYPE_GO_AWAY, 0, 0, 1) in frames          # go-away: protocol error

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "closing connection", "exceeds any window")


def test_stream_flood_closes_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        cfg = YamuxConfig(max_streams=8, max_refused_streams=16)
        async with make_host(yamux_config=cfg, identify_on_connect=False) as h:
            sec = await raw_secured(h)
            # 100 stream openings in one go; nothing else
            await sec.write(b"".join(frame(TYPE_WINDOW_UPDATE, FLAG_SYN, 2 * i + 1, 0)
                                     for i in range(100)))
            frames = await read_frames_until_eof(sec)
            acks = [f for f in frames if f[0] == TYPE_WINDOW_UPDATE and f[1] & FLAG_ACK]
            rsts = [f for f in frames if f[0] == TYPE_WINDOW_UPDATE and f[1] & FLAG_RST]
            assert len(acks) == 8                 # never more than the limit at once
            assert len(rsts) == 16                # refused, counted, then cut off
            assert (TYPE_GO_AWAY, 0, 0, 1) in frames
            await wait_until(lambda: h.connected_peers() == [], 10, "the host to hang up")

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "closing connection", "stream flood")


@pytest.mark.parametrize("name,bad,reason", [
    ("version", b"\x01" + bytes(11), "version"),
    ("type", frame(7, 0, 0, 0), "unknown frame type"),
    ("stream0", frame(TYPE_WINDOW_UPDATE, FLAG_SYN, 0, 0), "stream id 0"),
    ("parity", frame(TYPE_WINDOW_UPDATE, FLAG_SYN, 2, 0), "parity"),
    ("dup-syn", frame(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0) * 2, "already open"),
    ("window-overflow", frame(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0)
     + frame(TYPE_WINDOW_UPDATE, 0, 1, 0xFFFFFFFF), "overflow"),
])
def test_malformed_frames(name: str, bad: bytes, reason: str,
                          caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host(identify_on_connect=False) as h:
            sec = await raw_secured(h)
            await sec.write(bad)
            frames = await read_frames_until_eof(sec)
            assert frames[-1] == (TYPE_GO_AWAY, 0, 0, 1)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "closing connection", reason)


def test_ping_frames_and_late_frames() -> None:
    async def go() -> None:
        async with make_host(identify_on_connect=False) as h:
            sec = await raw_secured(h)
            # a frame for a stream nobody opened is dropped, not fatal
            await sec.write(frame(TYPE_DATA, 0, 99, 3, b"abc") + frame(TYPE_PING, FLAG_SYN, 0, 42))
            buf = await sec.read_frame()
            assert buf[:12] == frame(TYPE_PING, FLAG_ACK, 0, 42)
            conn = h.connections.connections()[0]
            await sec.write(frame(TYPE_GO_AWAY, 0, 0, 0))
            await wait_until(lambda: conn.session.remote_goaway, 10, "the go-away to arrive")
            assert conn.session.dropped_frames == 1
            with pytest.raises(MeshError):
                conn.open_stream()                  # no new streams after go-away
            sec.close()

    run(go())


def test_yamux_ping_and_reset_and_close() -> None:
    async def go() -> None:
        got: list[BaseException] = []

        async def reader(st: Stream) -> None:
            try:
                await st.read_until_eof(1 << 20)
            except StreamReset as e:
                got.append(e)

        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/r", reader)
            conn = await a.connect(addr_of(b))
            assert 0 < await conn.session.ping() < 1
            st = await a.new_stream(b.peer_id, ["/r"])
            await st.write(b"some")
            st.reset()
            with pytest.raises(StreamReset):
                await st.write(b"more")
            await wait_until(lambda: bool(got), 10, "the reader to see the reset")
            assert "reset by remote" in str(got[0])
            # go-away + close: the other side sees the connection end
            await conn.close()
            await wait_until(lambda: b.connected_peers() == [] == a.connected_peers(), 10,
                             "both hosts to drop the connection")

    run(go())


def test_memory_stays_bounded_under_a_stream_and_data_flood() -> None:
    """40 streams each pushing 1 MiB at a handler that never reads: the host holds at most
    max_streams x window, refuses the rest, and its memory follows that bound."""
    import tracemalloc

    async def go() -> None:
        async def never_reads(st: Stream) -> None:
            await asyncio.sleep(30)

        window = INITIAL_WINDOW
        cfg = YamuxConfig(max_streams=8, max_refused_streams=1000)
        async with make_host(yamux_config=cfg) as h, \
                make_host(yamux_config=YamuxConfig(max_streams=100)) as flooder:
            h.set_stream_handler("/sleep", never_reads)
            await flooder.connect(addr_of(h))
            await wait_until(lambda: h.connection(flooder.peer_id) is not None, 10,
                             "the host to accept the flooder")
            payload = bytes(1024 * 1024)     # one buffer, allocated before measuring
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]

            opened: list[Stream] = []

            async def push() -> None:
                st = await flooder.new_stream(h.peer_id, ["/sleep"])
                opened.append(st)
                await st.write(payload)

            tasks = [asyncio.ensure_future(push()) for _ in range(40)]
            # the flood at its height: every refused push ended, every accepted one stalled
            # on a full window
            await wait_until(lambda: sum(t.done() for t in tasks)
                             + sum(s.send_window == 0 for s in opened) == 40, 20,
                             "each push to be refused or to fill its window")
            grown = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.stop()
            conn = h.connection(flooder.peer_id)
            assert conn is not None
            assert conn.session.stream_count <= 8
            assert conn.session.buffered_bytes <= 8 * window
            assert conn.session.refused_streams >= 30        # counted, not queued
            # both sides live in this process: the receiver's windows, the sender's
            # encrypted frames in flight, and room for bookkeeping
            assert grown < 2 * 8 * window + 2 * 1024 * 1024, grown
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    run(go(), 30)


def test_length_prefixed_messages() -> None:
    """GossipSub's framing: many varint-prefixed messages, batched into big frames."""
    from pubmote.p2p.codec import encode_uvarint
    from pubmote.p2p.errors import ProtocolError

    async def go() -> None:
        got: list[bytes] = []
        done = asyncio.Event()

        async def rpc(st: Stream) -> None:
            try:
                while True:
                    got.append(await st.read_lp(4096))
            except asyncio.IncompleteReadError:
                done.set()

        refused: list[Exception] = []

        async def strict(st: Stream) -> None:
            try:
                await st.read_lp(10)
            except ProtocolError as e:
                refused.append(e)
            st.reset()

        async with make_host() as a, make_host() as b:
            b.set_stream_handler("/rpc", rpc)
            b.set_stream_handler("/strict", strict)
            await a.connect(addr_of(b))
            st = await a.new_stream(b.peer_id, ["/rpc"])
            msgs = [bytes([i % 251]) * (i % 300) for i in range(3000)]
            await st.write(b"".join(encode_uvarint(len(m)) + m for m in msgs))
            await st.write_lp(b"last")
            await st.close()
            await asyncio.wait_for(done.wait(), 5)
            assert got == [*msgs, b"last"]
            s2 = await a.new_stream(b.peer_id, ["/strict"])
            await s2.write_lp(b"x" * 11)
            with pytest.raises(StreamReset):
                await s2.read()
            assert refused and "exceeds 10" in str(refused[0])

    run(go())


def test_keepalive_closes_a_silent_peer(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        async with make_host(identify_on_connect=False, keepalive_interval_s=0.2,
                             keepalive_timeout_s=0.3) as h:
            sec = await raw_secured(h)      # reads nothing, answers no ping
            await wait_until(lambda: len(h.connected_peers()) == 1, 10, "the connection")
            frames = await read_frames_until_eof(sec, 5)
            assert any(f[0] == TYPE_PING and f[1] & FLAG_SYN for f in frames)
            assert h.connected_peers() == []

    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(go())
    _assert_logged(caplog, "stopped answering pings")
