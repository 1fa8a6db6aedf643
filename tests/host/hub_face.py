"""A face the hub can be handed in unit tests: the attributes and calls the hub reads of
a face, with no link behind it (what is sent is kept)."""

from __future__ import annotations


class StubFace:
    up = True
    board: str | None = None
    tracer = None

    def __init__(self, face_id: int = 1, kind: str = "test", label: str = "test") -> None:
        self.face_id = face_id
        self.kind = kind
        self.label = label
        self.sent: list[bytes] = []

    def send_packet(self, pkt: bytes) -> None:
        self.sent.append(pkt)

    def bad_frames(self) -> int:
        return 0
