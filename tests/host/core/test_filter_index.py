"""The hub's filter index says exactly what each subscriber's own SubFilter says, in the
subscribers' order, each subscriber once (filter_index.py)."""

from __future__ import annotations

from hub_face import StubFace
from hypothesis import given
from hypothesis import strategies as st

from pubmote.core.filter_index import FilterIndex
from pubmote.core.registry import BoardState


def _subscriber(name: str, filters: list[bytes]) -> BoardState:
    b = BoardState(name, b"", StubFace(), 4)
    b.set_filters(filters)
    return b


def test_examples() -> None:
    everything = _subscriber("all", [b""])
    temp = _subscriber("temp", [b"/t/temp|", b"/t/"])  # two filters that both match
    cmd = _subscriber("cmd", [b"/b1/command|"])
    none = _subscriber("none", [])
    index = FilterIndex([everything, temp, cmd, none])
    assert index.match(b"/t/temp|21.5") == [everything, temp]
    assert index.match(b"/b1/command|on") == [everything, cmd]
    assert index.match(b"/b1/command") == [everything]  # the filter is longer than the line
    assert FilterIndex([temp, cmd]).match(b"/x|1") == []
    assert FilterIndex([]).match(b"/x|1") == []


_filters = st.lists(st.binary(max_size=6).map(lambda b: b"/" + b if b else b""), max_size=4)


@given(st.lists(_filters, max_size=6), st.lists(st.binary(max_size=10), max_size=8))
def test_same_as_each_filter(filter_sets: list[list[bytes]], tails: list[bytes]) -> None:
    subs = [_subscriber("s%d" % i, fs) for i, fs in enumerate(filter_sets)]
    index = FilterIndex(subs)
    lines = [b"/" + t for t in tails] + [f + t for fs in filter_sets for f in fs
                                         for t in tails[:2]]
    for line in lines:
        assert index.match(line) == [b for b in subs if b.filter.matches(line)]


def test_hub_follows_filter_changes() -> None:
    # the hub's index is rebuilt when a subscriber's filters change, a board registers or
    # an NDN app's subscription goes away
    from pubmote.core.hub import Hub, Message

    hub = Hub()
    a = hub.boards["a"] = _subscriber("a", [b"/x|"])
    hub.publish(Message(b"/x", b"1", "t", "t"))
    assert [m.payload for m in a.outbox] == [b"1"]
    a.set_filters([b"/y|"])
    hub.publish(Message(b"/x", b"2", "t", "t"))
    assert [m.payload for m in a.outbox] == [b"1"]
    b = _subscriber("b", [b"/y|"])
    hub.publish(Message(b"/z", b"-", "t", "t"))  # the index as it is before b registers
    hub.boards["b"] = b
    hub.publish(Message(b"/y", b"3", "t", "t"))
    assert [m.payload for m in a.outbox] == [b"1", b"3"]
    assert [m.payload for m in b.outbox] == [b"3"]
    app = hub.app_subs[7] = _subscriber("app7", [b"/y|"])
    hub.publish(Message(b"/y", b"4", "t", "t"))
    assert [m.payload for m in app.outbox] == [b"4"]
    del hub.app_subs[7]
    hub.publish(Message(b"/y", b"5", "t", "t"))
    assert [m.payload for m in app.outbox] == [b"4"]
    assert [m.payload for m in a.outbox] == [b"1", b"3", b"4", b"5"]
