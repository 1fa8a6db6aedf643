"""The board node's duplicate-notify memory (CPython runs the firmware's node.py): the last
32 (publisher, NotifyNonce) pairs, bounded, exact per pair, one copy of each publisher."""

from __future__ import annotations

from pubmote_node.node import Node


def _node() -> Node:
    return Node({"name": "t1", "link": "pty", "path": "/dev/null"})


def test_remembers_pairs_exactly_and_forgets_the_oldest() -> None:
    n = _node()
    a, b = b"\x08\x01a", b"\x08\x01b"
    for i in range(40):
        n._remember(bytes(a), b"%04d" % i)
    assert len(n._seen_nonce) == len(n._seen_pub) == 32
    assert n._was_seen(a, b"0039") and n._was_seen(a, b"0008")
    assert not n._was_seen(a, b"0007")  # the oldest 8 are gone
    assert not n._was_seen(b, b"0039")  # same nonce, other publisher: a new message
    assert len({id(p) for p in n._seen_pub}) == 1  # one copy of the publisher's name


def test_publisher_uri_made_once_per_publisher() -> None:
    n = _node()
    a = b"\x08\x03pub"
    first = n._publisher_uri(bytes(a))
    assert first == b"/pub" and n._publisher_uri(bytes(a)) is first
    assert n._publisher_uri(b"\x08\x03sub") == b"/sub"
