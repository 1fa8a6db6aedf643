"""The mesh envelope (strict CBOR decode) and the per-origin gap/duplicate tracker."""

from __future__ import annotations

import random

import cbor2
import pytest

from pubmote.gateway.mesh.envelope import (
    DUPLICATE,
    LATE,
    MAX_PAYLOAD,
    NEW,
    STALE,
    Envelope,
    EnvelopeError,
    GapTracker,
)


def env(**kw: object) -> Envelope:
    base: dict[str, object] = {"topic": "/pubmote/demo/sim1/temperature", "payload": b"\xa1x",
                               "board": "sim1", "gateway": "gw1", "ts_ms": 1_700_000_000_000,
                               "epoch": 1_699_999_999_000, "seq": 1}
    base.update(kw)
    return Envelope(**base)  # type: ignore[arg-type]


def good_map() -> dict[str, object]:
    return {"v": 1, "t": "/a/b", "p": b"x", "b": "sim1", "g": "gw1", "ts": 5, "e": 4, "s": 1}


def test_round_trip_plain_and_directed() -> None:
    for e in (env(), env(address="/gw2/sim3", originator="/gw1/sim1", seq=2**40),
              env(payload=b"", board=""), env(taken_ms=1_699_999_999_900)):
        d = Envelope.decode(e.encode())
        assert d.as_map() == e.as_map()
        assert d.directed == (e.address is not None)


def test_encoding_is_canonical_cbor_readable_by_cbor2() -> None:
    e = env(address="/*/*", originator="/gw1")
    m = cbor2.loads(e.encode())
    assert m == {"v": 1, "t": e.topic, "p": e.payload, "b": "sim1", "g": "gw1",
                 "ts": e.ts_ms, "e": e.epoch, "s": 1, "a": "/*/*", "o": "/gw1"}
    # a map another implementation writes (cbor2, keys in another order) decodes too
    assert Envelope.decode(cbor2.dumps(dict(reversed(list(m.items()))))).as_map() == m


def test_taken_time_optional_and_carried() -> None:
    # tk: the board's taken-time (docs/protocols/event-time.md), left out when unknown
    assert "tk" not in cbor2.loads(env().encode())
    e = env(taken_ms=1_699_999_999_900)
    assert cbor2.loads(e.encode())["tk"] == 1_699_999_999_900
    assert Envelope.decode(e.encode()).taken_ms == 1_699_999_999_900
    assert Envelope.decode(env().encode()).taken_ms is None


def mutate(**kw: object) -> bytes:
    m = good_map()
    for k, v in kw.items():
        if v is KeyError:
            del m[k]
        else:
            m[k] = v
    return cbor2.dumps(m)


MALFORMED: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("truncated map", b"\xa8"),
    ("not a map", cbor2.dumps([1, 2, 3])),
    ("text", cbor2.dumps("hello")),
    ("garbage", b"\xff\xfe\xfd"),
    ("missing topic", mutate(t=KeyError)),
    ("missing seq", mutate(s=KeyError)),
    ("unknown key", mutate(x=1)),
    ("int key", cbor2.dumps({**good_map(), 7: 1})),
    ("version 2", mutate(v=2)),
    ("topic bytes", mutate(t=b"/a/b")),
    ("topic not a URI", mutate(t="a/b")),
    ("payload text", mutate(p="x")),
    ("seq zero", mutate(s=0)),
    ("seq negative", mutate(s=-1)),
    ("seq bool", mutate(s=True)),
    ("seq float", mutate(s=1.0)),
    ("seq too big", mutate(s=2**64 - 1)),
    ("epoch negative", mutate(e=-5)),
    ("gateway empty", mutate(g="")),
    ("gateway too long", mutate(g="g" * 300)),
    ("address without originator", mutate(a="/gw1")),
    ("originator without address", mutate(o="/gw1")),
    ("address not text", mutate(a=b"/gw1", o="/gw2")),
    ("payload too large", mutate(p=b"x" * (MAX_PAYLOAD + 1))),
    ("nested deep", cbor2.dumps({**good_map(), "p": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]})),
    ("null topic", mutate(t=None)),
    ("taken-time negative", mutate(tk=-1)),
    ("taken-time float", mutate(tk=1.5)),
    ("taken-time text", mutate(tk="5")),
]


@pytest.mark.parametrize("label,data", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_envelopes_are_envelope_errors(label: str, data: bytes) -> None:
    with pytest.raises(EnvelopeError):
        Envelope.decode(data)


def test_random_bytes_only_ever_raise_envelope_error() -> None:
    rng = random.Random(6)
    good = env(address="/gw2/x", originator="/gw1").encode()
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        try:
            Envelope.decode(bytes(data))
        except EnvelopeError:
            pass


def test_encode_checks_bounds() -> None:
    with pytest.raises(EnvelopeError):
        env(seq=0).encode()
    with pytest.raises(EnvelopeError):
        env(topic="no-slash").encode()


def test_tracker_in_order_duplicates_and_gaps() -> None:
    t = GapTracker(window=64)
    assert [t.observe("a", 1, s) for s in (1, 2, 3)] == [NEW, NEW, NEW]
    assert t.observe("a", 1, 3) == DUPLICATE
    assert t.observe("a", 1, 7) == NEW  # 4, 5, 6 missing
    assert t.counters["gaps"] == 3 and t.lost == 3
    assert t.observe("a", 1, 5) == LATE
    assert t.observe("a", 1, 5) == DUPLICATE
    assert t.lost == 2 and t.counters["late"] == 1
    assert t.counters["duplicates"] == 2
    o = t.origins()["a"]
    assert (o["high"], o["gaps"], o["late"], o["received"]) == (7, 3, 1, 5)


def test_tracker_first_message_is_no_gap_and_origins_are_separate() -> None:
    t = GapTracker()
    assert t.observe("a", 1, 500) == NEW
    assert t.observe("b", 1, 1) == NEW
    assert t.observe("b", 1, 1) == DUPLICATE
    assert t.observe("a", 1, 501) == NEW
    assert t.counters["gaps"] == 0


def test_tracker_window_and_epochs() -> None:
    t = GapTracker(window=8)
    t.observe("a", 10, 100)
    assert t.observe("a", 10, 103) == NEW
    assert t.observe("a", 10, 92) == STALE  # beyond the window: cannot tell, dropped, counted
    assert t.observe("a", 10, 97) == NEW    # sent before we heard the origin: no gap counted
    assert t.observe("a", 10, 101) == LATE
    assert t.lost == 1
    assert t.observe("a", 9, 101) == STALE  # an older incarnation of the origin
    assert t.observe("a", 11, 1) == NEW     # it restarted
    assert t.counters["restarts"] == 1
    assert t.observe("a", 11, 1) == DUPLICATE
    assert t.observe("a", 11, 1000) == NEW  # a jump larger than the window
    assert t.observe("a", 11, 999) == LATE
    assert t.counters["stale"] == 2


def test_tracker_is_bounded() -> None:
    t = GapTracker(max_origins=4)
    for i in range(10):
        t.observe(i, 1, 1)
    assert len(t) == 4 and t.counters["evicted"] == 6
    assert t.observe(9, 1, 1) == DUPLICATE  # the recent ones are kept


def test_tracker_random_order_delivers_each_once() -> None:
    rng = random.Random(1)
    t = GapTracker(window=256)
    seqs = [s for s in range(1, 201) for _ in range(rng.randint(1, 3))]
    # shuffle locally (reordering within 20 places), as a mesh with several paths does
    for i in range(len(seqs)):
        j = min(len(seqs) - 1, i + rng.randrange(20))
        seqs[i], seqs[j] = seqs[j], seqs[i]
    delivered = [s for s in seqs if t.observe("o", 1, s) in (NEW, LATE)]
    assert sorted(delivered) == list(range(1, 201))
    assert t.lost == 0
