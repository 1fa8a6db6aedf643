"""The board's duplicate-notify memory (the ring in firmware/pubmote_node/subscriber.py, on
CPython): the last 32 (publisher, NotifyNonce) pairs in fixed slots, bounded, exact per
pair, one copy of each publisher a slot still names; a notify sent again while its
message is being fetched starts no second fetch; messages reach the app in the order of
their notifies, whichever fetch ends first."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from pathlib import Path

from pubmote_node.subscriber import Subscriber, new_ring, ring_remember, ring_seen

SLOTS = 32
SIZE = SLOTS * 10 + 1  # the slots and the next slot's number


def test_remembers_pairs_exactly_and_forgets_the_oldest() -> None:
    ring = new_ring()
    a, b = b"\x08\x01a", b"\x08\x01b"
    for i in range(40):
        ring_remember(ring, bytes(a), b"%04d" % i)
    slots, publishers = ring
    assert len(slots) == SIZE  # fixed slots: the memory does not grow
    assert ring_seen(ring, a, b"0039") and ring_seen(ring, a, b"0008")
    assert not ring_seen(ring, a, b"0007")  # the oldest 8 are gone
    assert not ring_seen(ring, b, b"0039")  # same nonce, other publisher: a new message
    assert not ring_seen(ring, a, b"039") and not ring_seen(ring, a, b"00390")  # exact length
    assert publishers == [a]  # one copy of the publisher's name


def test_an_empty_ring_has_seen_nothing() -> None:
    ring = new_ring()
    for nonce in (b"", b"\x00", b"\xff" * 8, b"\xff" * 9):
        assert not ring_seen(ring, b"\x08\x01a", nonce)


def test_forgotten_publishers_free_their_place() -> None:
    ring = new_ring()
    for i in range(100):  # a new publisher for every message
        ring_remember(ring, b"\x08\x02p%d" % (i % 10) if i < 10 else b"\x08\x03q%02d" % i,
                      b"nonc")
    assert len(ring[1]) <= SLOTS
    assert ring_seen(ring, b"\x08\x03q99", b"nonc") and ring_seen(ring, b"\x08\x03q68", b"nonc")
    assert not ring_seen(ring, b"\x08\x03q67", b"nonc")
    assert not ring_seen(ring, b"\x08\x02p9", b"nonc")


def test_long_nonces_are_told_apart() -> None:
    ring = new_ring()
    a = b"\x08\x01a"
    ring_remember(ring, a, b"0123456789abcdef-1")
    assert ring_seen(ring, a, b"0123456789abcdef-1")
    assert not ring_seen(ring, a, b"0123456789abcdef-2")  # same first 8 bytes, other nonce


class _Data:
    content = b"payload"


class _SlowExchange:
    """The board's exchange on a slow link: each fetch waits until `answer` is set."""

    def __init__(self) -> None:
        self.fetches = 0
        self.answer = asyncio.Event()

    def encode(self, fn: object, *args: object, **kw: object) -> int:
        return 1

    async def express(self, n: int, timeout_ms: int) -> _Data:
        self.fetches += 1
        await self.answer.wait()
        return _Data()


class _Port:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send_quiet(self, pkt: bytes) -> None:
        self.sent.append(bytes(pkt))


def test_a_notify_sent_again_during_its_fetch_starts_no_second_fetch() -> None:
    # a bridge sends its notify again when a slow board has not answered in time: the
    # board, still fetching that message, lets the copy go (the fetch's ack answers both)
    async def run() -> None:
        ex, port = _SlowExchange(), _Port()
        counters = {"dup_notify": 0, "fetch_failed": 0, "received": 0}
        got: list[bytes] = []
        sub = Subscriber(ex, port, counters, lambda topic, payload, pub: got.append(payload))
        args = (b"\x08\x03cmd", b"\x08\x02gw", b"n123", 1000, 3)
        first = asyncio.create_task(sub.on_notify(b"\x07\x00", *args))
        await asyncio.sleep(0)
        # the copy, while the fetch is out (a second fetch would wait: bounded)
        await asyncio.wait_for(sub.on_notify(b"\x07\x00", *args), 5)
        assert ex.fetches == 1 and counters["dup_notify"] == 1 and port.sent == []
        ex.answer.set()
        await first
        assert got == [b"payload"] and len(port.sent) == 1  # delivered once, one ack
        await sub.on_notify(b"\x07\x00", *args)  # a copy after it: acked from the ring
        assert ex.fetches == 1 and counters["dup_notify"] == 2 and len(port.sent) == 2
        assert sub._fetching == []  # nothing left behind

    asyncio.run(run())


class _Data2:
    def __init__(self, content: bytes) -> None:
        self.content = content


class _OutOfOrderExchange:
    """Fetches answered in the order the test says, not the order they were sent."""

    def __init__(self) -> None:
        self.waiting: dict[bytes, asyncio.Event] = {}

    def encode(self, fn: object, publisher: bytes, topic: bytes, nonce: bytes,
               **kw: object) -> bytes:
        return nonce

    async def express(self, nonce: bytes, timeout_ms: int) -> _Data2:
        ev = self.waiting[nonce] = asyncio.Event()
        await ev.wait()
        return _Data2(nonce)


def test_messages_reach_the_app_in_the_order_of_their_notifies() -> None:
    async def run() -> None:
        ex, port = _OutOfOrderExchange(), _Port()
        counters = {"dup_notify": 0, "fetch_failed": 0, "received": 0}
        got: list[bytes] = []
        sub = Subscriber(ex, port, counters, lambda topic, payload, pub: got.append(payload))
        tasks = [asyncio.create_task(sub.on_notify(b"\x07\x01" + n, b"\x08\x01t",
                                                   b"\x08\x02gw", n, 1000, 3))
                 for n in (b"n1", b"n2", b"n3")]
        for _ in range(20):
            await asyncio.sleep(0)
        assert sorted(ex.waiting) == [b"n1", b"n2", b"n3"]  # fetched together
        ex.waiting[b"n3"].set()  # the last one's Data first, then the second's
        ex.waiting[b"n2"].set()
        await asyncio.sleep(0.05)
        assert got == []  # held until the first is handed on
        ex.waiting[b"n1"].set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert got == [b"n1", b"n2", b"n3"]
        assert len(port.sent) == 3 and sub._fetching == []

    asyncio.run(run())


def test_matches_a_model_of_the_last_32_pairs() -> None:
    # random publishers and nonces of every length around the 8 bytes a slot keeps: the
    # ring answers as the list of the last 32 pairs remembered does, and stays bounded
    rnd = random.Random(7)
    pubs = [b"\x08\x02p" + bytes([k]) for k in range(40)]
    ring = new_ring()
    model: list[tuple[bytes, bytes]] = []
    for _ in range(3000):
        pub = rnd.choice(pubs[: rnd.choice((2, 10, 40))])
        nonce = bytes(rnd.randrange(4) for _ in range(rnd.choice((0, 1, 4, 7, 8, 9, 16))))
        assert ring_seen(ring, pub, nonce) == ((pub, nonce) in model[-SLOTS:])
        if rnd.random() < 0.7:
            ring_remember(ring, pub, nonce)
            model.append((pub, nonce))
        assert len(ring[0]) == SIZE and len(ring[1]) <= SLOTS


def test_the_same_answers_on_the_micropython_unix_port() -> None:
    # the board runs the ring on MicroPython: the same pairs give the same answers there
    code = """
from pubmote_node.subscriber import Subscriber, new_ring, ring_remember, ring_seen
ring = new_ring()
out = []
for i in range(300):
    pub = b"\\x08\\x02p" + bytes([i * 7 % 13])
    nonce = bytes([i * 5 % 3]) * (i % 11)
    out.append("1" if ring_seen(ring, pub, nonce) else "0")
    if i % 3:
        ring_remember(ring, pub, nonce)
print("".join(out), len(ring[0]), len(ring[1]))
"""
    root = Path(__file__).resolve().parents[3]
    exe = str(Path(sys.executable).parent / "micropython")
    env = dict(os.environ, MICROPYPATH=".frozen:%s:%s" % (root / "firmware", root / "shared"))
    p = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    assert p.stdout == here and "1" in here and "0" in here, (p.stdout, here)
