"""A board that sends a good frame holding no packet (its CRC only) has a bad packet
counted, as for any other malformed packet; the hub carries on (it raised IndexError out
of the face's data_received before)."""

from __future__ import annotations

from hub_face import StubFace

from pubmote.core.hub import Hub


def test_empty_packet_is_a_bad_packet() -> None:
    hub = Hub()
    hub.on_packet(StubFace(kind="tcp"), b"")
    hub.on_packet(StubFace(kind="tcp"), b"\xff")  # not an NDN packet type either
    assert hub.counters["bad_packets"] == 2
