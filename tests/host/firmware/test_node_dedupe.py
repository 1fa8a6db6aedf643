"""The board node's duplicate-notify memory (CPython runs the firmware's node.py): the last
32 (publisher, NotifyNonce) pairs in fixed slots, bounded, exact per pair, one copy of each
publisher a slot still names."""

from __future__ import annotations

from pubmote_node.node import Node


def _node() -> Node:
    return Node({"name": "t1", "link": "pty", "path": "/dev/null"})


def test_remembers_pairs_exactly_and_forgets_the_oldest() -> None:
    n = _node()
    a, b = b"\x08\x01a", b"\x08\x01b"
    for i in range(40):
        n._remember(bytes(a), b"%04d" % i)
    assert len(n._seen) == 32 * 10  # fixed slots: the memory does not grow
    assert n._was_seen(a, b"0039") and n._was_seen(a, b"0008")
    assert not n._was_seen(a, b"0007")  # the oldest 8 are gone
    assert not n._was_seen(b, b"0039")  # same nonce, other publisher: a new message
    assert not n._was_seen(a, b"039") and not n._was_seen(a, b"00390")  # exact length
    assert n._seen_pubs == [a]  # one copy of the publisher's name


def test_forgotten_publishers_free_their_place() -> None:
    n = _node()
    for i in range(100):  # a new publisher for every message
        n._remember(b"\x08\x02p%d" % (i % 10) if i < 10 else b"\x08\x03q%02d" % i, b"nonc")
    assert len(n._seen_pubs) <= 32
    assert n._was_seen(b"\x08\x03q99", b"nonc") and n._was_seen(b"\x08\x03q68", b"nonc")
    assert not n._was_seen(b"\x08\x03q67", b"nonc") and not n._was_seen(b"\x08\x02p9", b"nonc")


def test_long_nonces_are_told_apart() -> None:
    n = _node()
    a = b"\x08\x01a"
    n._remember(a, b"0123456789abcdef-1")
    assert n._was_seen(a, b"0123456789abcdef-1")
    assert not n._was_seen(a, b"0123456789abcdef-2")  # same first 8 bytes, other nonce


def test_publisher_uri_made_once_per_publisher() -> None:
    n = _node()
    a = b"\x08\x03pub"
    first = n._publisher_uri(bytes(a))
    assert first == b"/pub" and n._publisher_uri(bytes(a)) is first
    assert n._publisher_uri(b"\x08\x03sub") == b"/sub"
