"""The forwarder's FIB and PIT on their own: longest-prefix match, exact-match PIT with
aggregation, nonce loops, timeouts, and the bounds."""

from __future__ import annotations

import asyncio

from e2e import wait_until
from pubmote.core.forwarder import Forwarder
from pubmote_wire import name as ndn_name


class FakeFace:
    def __init__(self, face_id: int) -> None:
        self.face_id = face_id
        self.label = "fake%d" % face_id
        self.sent: list[bytes] = []

    def send_packet(self, pkt: bytes) -> None:
        self.sent.append(pkt)


N = ndn_name.from_uri


def test_longest_prefix_match() -> None:
    fwd = Forwarder()
    a, b = FakeFace(1), FakeFace(2)
    fwd.add_route(N("/a"), a)
    fwd.add_route(N("/a/b"), b)
    assert fwd.lookup(N("/a/b/c")) == [b]
    assert fwd.lookup(N("/a/x")) == [a]
    assert fwd.lookup(N("/ab")) == []  # component-aligned, not byte-aligned
    fwd.remove_face(b)
    assert fwd.lookup(N("/a/b/c")) == [a]


def test_fib_bound() -> None:
    """A route beyond the FIB's bounds (in total, per face) is a counted refusal, never an
    exception: registration goes on through it."""
    fwd = Forwarder(max_fib=2, max_fib_per_face=8)
    f = FakeFace(1)
    assert fwd.add_route(N("/1"), f) and fwd.add_route(N("/2"), f)
    assert fwd.add_route(N("/3"), f) is False
    assert fwd.counters["fib_full"] == 1 and fwd.hits.counts == {"fib_max": 1}
    assert fwd.add_route(N("/2"), FakeFace(2))  # a second next hop of a known prefix is fine
    one = Forwarder(max_fib=100, max_fib_per_face=2)
    assert one.add_route(N("/a"), f) and one.add_route(N("/b"), f)
    assert one.add_route(N("/c"), f) is False and one.add_route(N("/a"), f)
    assert one.add_route(N("/c"), FakeFace(2))  # another face has its own share
    assert one.hits.counts == {"fib_max_per_face": 1}


def test_pit_aggregation_loops_and_satisfy() -> None:
    async def run() -> None:
        fwd = Forwarder()
        a, b, up = FakeFace(1), FakeFace(2), FakeFace(3)
        nm = N("/x/y")
        assert fwd.add_pending(nm, 1, 1000, face=a) is True
        assert fwd.add_pending(nm, 2, 1000, face=b) is False  # aggregated
        assert fwd.add_pending(nm, 1, 1000, face=b) is False  # same nonce: a loop
        assert fwd.counters["aggregated"] == 1 and fwd.counters["loops"] == 1
        assert fwd.satisfy(nm, b"DATA", up) is True
        assert a.sent == [b"DATA"] and b.sent == [b"DATA"]
        assert fwd.satisfy(nm, b"DATA", up) is False
        assert fwd.counters["unsolicited_data"] == 1

    asyncio.run(run())


def test_pit_timeout_tells_internal_sinks() -> None:
    async def run() -> None:
        fwd = Forwarder()
        heard: list[tuple[bytes | None, int | None]] = []
        assert fwd.add_pending(N("/t"), 5, 20, sink=lambda d, r: heard.append((d, r)))
        await wait_until(lambda: bool(heard), 10, "the PIT entry to time out")
        assert heard == [(None, None)] and not fwd.pit and fwd.counters["pit_timeouts"] == 1

    asyncio.run(run())


def test_nack_tells_internal_sinks_its_reason() -> None:
    async def run() -> None:
        fwd = Forwarder()
        heard: list[tuple[bytes | None, int | None]] = []
        assert fwd.add_pending(N("/t"), 5, 1000, sink=lambda d, r: heard.append((d, r)))
        assert fwd.nack(N("/t"), 150) is not None  # NoRoute
        assert heard == [(None, 150)] and not fwd.pit
        assert fwd.nack(N("/t"), 150) is None  # nothing pending any more

    asyncio.run(run())


def test_pit_bounds_total_and_per_face() -> None:
    async def run() -> None:
        fwd = Forwarder(max_pit=10, max_pit_per_face=4)
        flood, other = FakeFace(1), FakeFace(2)
        for i in range(8):
            fwd.add_pending(N("/f/%d" % i), i, 1000, face=flood)
        assert len(fwd.pit) == 4 and fwd.counters["pit_face_quota"] == 4
        for i in range(8):
            fwd.add_pending(N("/o/%d" % i), i, 1000, face=other)
        assert len(fwd.pit) == 8  # the other face got its own share
        fwd.satisfy(N("/f/0"), b"D", None)
        assert fwd.add_pending(N("/f/new"), 99, 1000, face=flood) is True
        fwd.close()

    asyncio.run(run())


def test_hub_passes_nacks_on_and_refuses_nested_lp() -> None:
    """A Nack from the face that was asked goes back to the face that asked, with its
    reason; an LpPacket nested in an LpPacket is malformed input, counted."""
    from pubmote.core.hub import Hub
    from pubmote_wire import interest as ndn_interest
    from pubmote_wire import lp

    class HubFake(FakeFace):
        kind = "ndn"
        up = True
        board = None
        tracer = None

        def bad_frames(self) -> int:
            return 0

    async def run() -> None:
        hub = Hub()
        app, producer = HubFake(11), HubFake(12)
        hub.fwd.add_route(N("/p"), producer)
        interest = ndn_interest.encode(N("/p/x"), nonce=9, lifetime_ms=1000)
        hub.on_packet(app, interest)
        assert producer.sent == [interest]
        buf = bytearray(len(interest) + 32)
        n = lp.encode_nack(buf, 0, interest, lp.NACK_CONGESTION)
        hub.on_packet(producer, bytes(buf[:n]))
        back = lp.decode_lp(app.sent[-1])
        assert back.nack_reason == lp.NACK_CONGESTION and bytes(back.fragment) == interest
        assert not hub.fwd.pit
        nested = lp.encode(lp.encode(interest))
        hub.on_packet(app, nested)
        assert hub.counters["bad_packets"] == 1
        await hub.close()

    asyncio.run(run())
