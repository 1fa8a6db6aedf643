"""The SP PUB endpoint's delivery guarantee at shutdown: what it accepted for a subscriber
(and so acked to the board) reaches that subscriber when the bridge stops in order, even
when the subscriber was not reading at that moment; one that reads nothing is cut off
after the flush deadline and counted."""

from __future__ import annotations

import asyncio
import socket
import threading

from e2e import free_port, wait_until
from pubmote.core.hub import Hub, Message
from pubmote.faces.sp import SpEndpoint
from pubmote_wire import sp

N = 1000
PAYLOAD = b"x" * 8000  # 8 MB in all: more than the loopback socket buffers hold


def _subscriber(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    s.connect(("127.0.0.1", port))
    s.sendall(sp.header(sp.SUB))
    return s


def _read_all(s: socket.socket) -> list[bytes]:
    """Every message until the bridge closes the connection."""
    buf = bytearray()
    while chunk := s.recv(1 << 16):
        buf += chunk
    dec = sp.MsgDecoder(expect_header=sp.PUB)
    return [bytes(m) for m in dec.feed(bytes(buf))]


async def _endpoint(buffer_bytes: int) -> tuple[SpEndpoint, int]:
    port = free_port()
    ep = SpEndpoint(Hub(), "tcp://127.0.0.1:%d" % port, sp.PUB, buffer_bytes=buffer_bytes)
    await ep.start()
    return ep, port


def test_stop_flushes_what_subscribers_were_promised() -> None:
    got: list[bytes] = []

    async def main() -> dict[str, int]:
        ep, port = await _endpoint(buffer_bytes=16 << 20)
        s = _subscriber(port)
        await wait_until(lambda: any(c.ready for c in ep.conns), 10, "the subscriber")
        for i in range(N):
            ep.relay(Message(b"/t/%d" % i, PAYLOAD, "test", "test"))
        await asyncio.sleep(0)  # one turn: what was relayed is written out
        # the subscriber has read nothing yet: most of it waits in the bridge's buffer
        assert sum(c.t.get_write_buffer_size() for c in ep.conns if c.t) > 0
        reader.append(threading.Thread(target=lambda: got.extend(_read_all(s))))
        reader[0].start()
        await ep.close()
        return ep.counters  # and the event loop ends here, as the bridge's does

    reader: list[threading.Thread] = []
    counters = asyncio.run(main())
    reader[0].join(30)
    assert counters["sent"] == N and counters["dropped"] == 0, counters
    assert counters["unflushed"] == 0, counters
    assert len(got) == N and got == [b"/t/%d|" % i + PAYLOAD for i in range(N)]


def test_a_subscriber_that_reads_nothing_is_cut_off_and_counted() -> None:
    async def main() -> dict[str, int]:
        ep, port = await _endpoint(buffer_bytes=16 << 20)
        s = _subscriber(port)
        await wait_until(lambda: any(c.ready for c in ep.conns), 10, "the subscriber")
        for i in range(N):
            ep.relay(Message(b"/t/%d" % i, PAYLOAD, "test", "test"))
        await ep.close(flush_s=0.2)
        s.close()
        return ep.counters

    counters = asyncio.run(main())
    assert counters["unflushed"] == 1, counters
