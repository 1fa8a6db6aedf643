"""The board's link-batch publishers (CPython runs the firmware's batch_link.py behind a
stand-in node): an ACKS frame wakes the publishers it acks, one that acks part of a buffer
leaves the rest waiting (not spinning) until their own acks, and a publisher whose ack never
comes times out, sends its record again and is acked by the retry."""

from __future__ import annotations

import asyncio
from typing import Any

from pubmote_node.batch_link import Batcher
from pubmote_node.clock import Clock, ticks_add, ticks_ms
from pubmote_wire import batch, framing

TOPIC = "/t/b1/data"


class _Port:
    """What a Batcher uses of a Port; each frame's records' seqs land in `sent`."""

    def __init__(self) -> None:
        self.up = True
        self._out = bytearray(258)
        self.sent: list[list[int]] = []
        self.taken: list[int | None] = []  # each record's taken-time, in order
        self.frames = 0

    async def send(self, pkt: object, framer: Any) -> None:
        n = framer(self._out)
        if n:
            self.frames += 1
            payload = framing.FrameDecoder(300).feed(bytes(self._out[:n]))[0]
            recs = batch.decode_batch(payload)[1]
            self.sent.append([r[0] for r in recs])
            self.taken += [r[3] for r in recs]


class _Node:
    """What a Batcher uses of a Node."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {"retries": 2}
        self.counters = {"soft_full": 0, "published": 0, "acked": 0, "publish_failed": 0}
        self.timeout_ms = 300
        self.port = _Port()
        self.session = _Session()


class _Session:
    def __init__(self) -> None:
        self.clock = Clock()


def _acks(b: Batcher, seqs: list[int]) -> bytes:
    buf = bytearray(64)
    k = batch.begin(buf, batch.ACKS, b.epoch)
    return bytes(buf[: batch.add_acks(buf, k, seqs)])


async def _until(cond: Any, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not cond():
            await asyncio.sleep(0.005)


def test_partial_acks_wake_only_the_acked() -> None:
    async def main() -> None:
        node = _Node()
        b = Batcher(node, False)
        node.timeout_ms = 5000  # no retry in this test
        tasks = [asyncio.create_task(b.publish(TOPIC, b"m%d" % i, 0)) for i in range(4)]
        await _until(lambda: node.port.sent)
        assert node.port.sent == [[0, 1, 2, 3]]  # one buffer, one frame
        b.on_acks(_acks(b, [0, 2]))  # part of the buffer
        await _until(lambda: tasks[0].done() and tasks[2].done())
        assert tasks[0].result() is True and tasks[2].result() is True
        assert not tasks[1].done() and not tasks[3].done()
        # the others wait on an Event not yet set (a set one would let them spin)
        assert not b._state[1].is_set() and b._state[3] is b._state[1]
        await asyncio.sleep(0.05)
        assert not tasks[1].done() and not tasks[3].done() and node.counters["acked"] == 2
        b.on_acks(_acks(b, [1, 3]))
        assert await asyncio.gather(tasks[1], tasks[3]) == [True, True]
        assert node.counters["acked"] == 4 and not b._state
        assert node.port.frames == 1

    asyncio.run(main())


def test_unacked_record_is_sent_again_and_acked() -> None:
    async def main() -> None:
        node = _Node()
        b = Batcher(node, False)
        tasks = [asyncio.create_task(b.publish(TOPIC, b"m%d" % i, 0)) for i in range(2)]
        await _until(lambda: node.port.sent)
        b.on_acks(_acks(b, [0]))  # seq 1's ack is lost
        assert await tasks[0] is True
        await _until(lambda: len(node.port.sent) == 2)  # the ticker timed it out: sent again
        assert node.port.sent[1] == [1]
        b.on_acks(_acks(b, [1]))
        assert await tasks[1] is True
        assert node.counters["publish_failed"] == 0 and node.counters["acked"] == 2

    asyncio.run(main())


def test_no_ack_ever_fails_after_the_retries() -> None:
    async def main() -> None:
        node = _Node()
        b = Batcher(node, False)
        assert await b.publish(TOPIC, b"lost", 0) is False
        assert node.port.sent == [[0], [0], [0]]  # first send and two retries
        assert node.counters["publish_failed"] == 1 and not b._state

    asyncio.run(main())


def test_timed_batches_carry_each_records_taken_time() -> None:
    # the board's clock synced to 1.7e12 ms; records stamped 5 s and 1 s before the sync
    # arrive with exactly those times, read against the frame's clock when it is sent
    async def main() -> None:
        node = _Node()
        b = Batcher(node, True)
        now = ticks_ms()
        gw_ms = 1_700_000_000_000
        node.session.clock.sync(gw_ms, now, now)
        stamps = [ticks_add(now, -5000), ticks_add(now, -1000)]
        tasks = [asyncio.create_task(b.publish(TOPIC, b"m%d" % i, stamps[i])) for i in range(2)]
        await _until(lambda: node.port.sent == [[0, 1]])
        assert node.port.taken == [gw_ms - 5000, gw_ms - 1000]
        b.on_acks(_acks(b, [0, 1]))
        assert await asyncio.gather(*tasks) == [True, True]
        # without a synced clock a timed frame says so: no taken-times
        node.session.clock = Clock()
        t = asyncio.create_task(b.publish(TOPIC, b"late", now))
        await _until(lambda: len(node.port.sent) == 2)
        assert node.port.taken[2] is None
        b.on_acks(_acks(b, [2]))
        assert await t is True

    asyncio.run(main())
