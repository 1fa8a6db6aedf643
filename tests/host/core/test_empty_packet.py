"""A board that sends a good frame holding no packet (its CRC only) has a bad packet
counted, as for any other malformed packet; the hub carries on (it raised IndexError out
of the face's data_received before)."""

from __future__ import annotations

from pubmote.core.hub import Hub


class _Face:
    face_id = 1
    label = "test"
    kind = "tcp"
    up = True
    board = None
    tracer = None

    def send_packet(self, pkt: bytes) -> None:
        pass

    def bad_frames(self) -> int:
        return 0


def test_empty_packet_is_a_bad_packet() -> None:
    hub = Hub()
    hub.on_packet(_Face(), b"")
    hub.on_packet(_Face(), b"\xff")  # not an NDN packet type either
    assert hub.counters["bad_packets"] == 2
