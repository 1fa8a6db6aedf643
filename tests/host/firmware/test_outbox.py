"""The board's outbox (firmware outbox.py on CPython, behind a stand-in node): a publish with
wait=False returns at once; while the bridge is away the messages wait, bounded in messages
and bytes, the oldest dropped and counted; once it is back they go in order, fresh ones
after them; a message the bridge does not ack is tried again, one it never acks is given up
and counted without blocking the rest."""

from __future__ import annotations

import asyncio
from typing import Any

from pubmote_node.node import Node
from pubmote_node.outbox import Outbox

TOPIC = "/pubmote/demo/b1/temperature"


class _Session:
    def __init__(self) -> None:
        self.connected = False


class _Node:
    """What an Outbox uses of a Node."""

    def __init__(self, **config: Any) -> None:
        self.config: dict[str, Any] = dict(config)
        self.counters: dict[str, int] = {"soft_full": 0}
        self.session = _Session()


class _Bridge:
    """The node's waited publish: records what it acks, in order; `refuse` payloads are
    never acked, the first `lose` sends are not acked (an ack lost), the first `full`
    find the soft state full (the app's waited publishes hold it)."""

    def __init__(self, node: _Node, lose: int = 0, refuse: tuple[bytes, ...] = (),
                 full: int = 0) -> None:
        self.node = node
        self.full = full
        self.acked: list[bytes] = []
        self.stamps: list[int] = []  # the publish ticks each acked message was sent with
        self.sends = 0
        self.lose = lose
        self.refuse = refuse

    async def send(self, topic: str, payload: bytes, stamp: int) -> bool:
        self.sends += 1
        await asyncio.sleep(0.001)  # a round trip
        if not self.node.session.connected or payload in self.refuse:
            return False
        if self.full > 0:
            self.full -= 1
            self.node.counters["soft_full"] += 1
            return False
        if self.lose > 0:
            self.lose -= 1
            return False
        self.acked.append(payload)
        self.stamps.append(stamp)
        return True


async def _until(cond: Any, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not cond():
            await asyncio.sleep(0.005)


def _msg(i: int) -> bytes:
    return b"%04d" % i


def test_queued_during_outage_then_delivered_in_order_with_fresh_after() -> None:
    async def main() -> None:
        node = _Node()
        br = _Bridge(node)
        ob = Outbox(node, br.send)
        for i in range(20):
            ob.put(TOPIC, _msg(i), 1000 + i)  # returns at once: nothing is waited on
        await asyncio.sleep(0.3)
        assert br.acked == [] and len(ob) == 20
        node.session.connected = True
        await _until(lambda: len(br.acked) >= 5)
        for i in range(20, 30):  # fresh readings while the queue drains
            ob.put(TOPIC, _msg(i), 1000 + i)
        await _until(lambda: len(ob) == 0)
        assert br.acked == [_msg(i) for i in range(30)]
        # each sent with the ticks of its put: its taken-time, not its sending time
        assert br.stamps == [1000 + i for i in range(30)]
        assert node.counters["outbox_dropped"] == 0
        assert not ob._draining  # the drain task ended with the queue
        ob.put(TOPIC, _msg(30), 1000 + 30)  # and a new one starts for the next message
        await _until(lambda: len(br.acked) == 31)

    asyncio.run(main())


def test_full_by_messages_drops_the_oldest_and_counts() -> None:
    async def main() -> None:
        node = _Node(outbox_len=8)
        br = _Bridge(node)
        ob = Outbox(node, br.send)
        for i in range(20):
            ob.put(TOPIC, _msg(i), 1000 + i)
        assert len(ob) == 8 and node.counters["outbox_dropped"] == 12
        node.session.connected = True
        await _until(lambda: len(ob) == 0)
        assert br.acked == [_msg(i) for i in range(12, 20)]

    asyncio.run(main())


def test_full_by_bytes_drops_the_oldest_and_counts() -> None:
    async def main() -> None:
        node = _Node(outbox_bytes=10 * (len(TOPIC) + 4))
        br = _Bridge(node)
        ob = Outbox(node, br.send)
        for i in range(15):
            ob.put(TOPIC, _msg(i), 1000 + i)
        assert len(ob) == 10 and node.counters["outbox_dropped"] == 5
        assert ob._bytes == 10 * (len(TOPIC) + 4)
        node.session.connected = True
        await _until(lambda: len(ob) == 0)
        assert br.acked == [_msg(i) for i in range(5, 15)]
        assert ob._bytes == 0

    asyncio.run(main())


def test_unacked_is_tried_again_and_a_refused_one_does_not_block_the_rest() -> None:
    async def main() -> None:
        node = _Node()
        node.session.connected = True
        br = _Bridge(node, lose=2, refuse=(_msg(3),))
        ob = Outbox(node, br.send)
        for i in range(6):
            ob.put(TOPIC, _msg(i), 1000 + i)
        await _until(lambda: len(ob) == 0)
        assert br.acked == [_msg(i) for i in (0, 1, 2, 4, 5)]
        assert node.counters["outbox_failed"] == 1
        assert node.counters["outbox_dropped"] == 0

    asyncio.run(main())


def test_a_full_soft_state_is_waited_out_not_counted_against_the_message() -> None:
    async def main() -> None:
        node = _Node()
        node.session.connected = True
        br = _Bridge(node, full=10)  # more than the tries a message gets
        ob = Outbox(node, br.send)
        for i in range(3):
            ob.put(TOPIC, _msg(i), 1000 + i)
        await _until(lambda: len(ob) == 0)
        assert br.acked == [_msg(i) for i in range(3)]
        assert node.counters["outbox_failed"] == 0

    asyncio.run(main())


def test_topics_shared_between_queued_messages() -> None:
    node = _Node()
    ob = Outbox(node, _Bridge(node).send)

    async def main() -> None:
        ob.put("/a/" + "t", b"1", 0)
        ob.put("/a/" + "t", b"2", 0)  # an equal topic, another object: stored once
        assert ob._q[0] is ob._q[2]

    asyncio.run(main())


def test_node_publish_without_wait_returns_queued_at_once() -> None:
    async def main() -> None:
        node = Node({"name": "b1", "link": "pty", "path": "/nonexistent"})
        assert not node.connected  # never run: no bridge at all
        async with asyncio.timeout(1):
            for i in range(3):
                assert await node.publish(TOPIC, _msg(i), wait=False) == "queued"
        st = node.stats()
        assert st["outbox"] == 3 and st["outbox_dropped"] == 0
        node._outbox._q.clear()  # let its drain task end

    asyncio.run(main())
