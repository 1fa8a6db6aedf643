"""The board's duplicate-notify memory (firmware/pubmote_node/subscriber.py, on CPython): the
last 32 (publisher, NotifyNonce) pairs in fixed slots, bounded, exact per pair, one copy of
each publisher a slot still names."""

from __future__ import annotations

import random

from pubmote_node.subscriber import DedupeRing

SLOTS = 32


def test_remembers_pairs_exactly_and_forgets_the_oldest() -> None:
    ring = DedupeRing()
    a, b = b"\x08\x01a", b"\x08\x01b"
    for i in range(40):
        ring.remember(bytes(a), b"%04d" % i)
    assert len(ring.slots) == SLOTS * 10  # fixed slots: the memory does not grow
    assert ring.seen(a, b"0039") and ring.seen(a, b"0008")
    assert not ring.seen(a, b"0007")  # the oldest 8 are gone
    assert not ring.seen(b, b"0039")  # same nonce, other publisher: a new message
    assert not ring.seen(a, b"039") and not ring.seen(a, b"00390")  # exact length
    assert ring.publishers == [a]  # one copy of the publisher's name


def test_an_empty_ring_has_seen_nothing() -> None:
    ring = DedupeRing()
    for nonce in (b"", b"\x00", b"\xff" * 8, b"\xff" * 9):
        assert not ring.seen(b"\x08\x01a", nonce)


def test_forgotten_publishers_free_their_place() -> None:
    ring = DedupeRing()
    for i in range(100):  # a new publisher for every message
        ring.remember(b"\x08\x02p%d" % (i % 10) if i < 10 else b"\x08\x03q%02d" % i, b"nonc")
    assert len(ring.publishers) <= SLOTS
    assert ring.seen(b"\x08\x03q99", b"nonc") and ring.seen(b"\x08\x03q68", b"nonc")
    assert not ring.seen(b"\x08\x03q67", b"nonc") and not ring.seen(b"\x08\x02p9", b"nonc")


def test_long_nonces_are_told_apart() -> None:
    ring = DedupeRing()
    a = b"\x08\x01a"
    ring.remember(a, b"0123456789abcdef-1")
    assert ring.seen(a, b"0123456789abcdef-1")
    assert not ring.seen(a, b"0123456789abcdef-2")  # same first 8 bytes, other nonce


def test_matches_a_model_of_the_last_32_pairs() -> None:
    # random publishers and nonces of every length around the 8 bytes a slot keeps: the
    # ring answers as the list of the last 32 pairs remembered does, and stays bounded
    rnd = random.Random(7)
    pubs = [b"\x08\x02p" + bytes([k]) for k in range(40)]
    ring = DedupeRing()
    model: list[tuple[bytes, bytes]] = []
    for _ in range(3000):
        pub = rnd.choice(pubs[: rnd.choice((2, 10, 40))])
        nonce = bytes(rnd.randrange(4) for _ in range(rnd.choice((0, 1, 4, 7, 8, 9, 16))))
        assert ring.seen(pub, nonce) == ((pub, nonce) in model[-SLOTS:])
        if rnd.random() < 0.7:
            ring.remember(pub, nonce)
            model.append((pub, nonce))
        assert len(ring.slots) == SLOTS * 10 and len(ring.publishers) <= SLOTS
