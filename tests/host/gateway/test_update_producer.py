"""The bridge's update producer, through the hub as a board's Interests reach it: the call
to fetch, the manifest signed with the board's key (HmacWithSha256), segments with their
segment-number component (type 0x32), FinalBlockId (0x1A) and DigestSha256, and reports
taken only from the board's own face."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pubmote.core.auth import BoardAuth
from pubmote.core.hub import Hub
from pubmote.core.registry import BoardState
from pubmote.faces.board import next_face_id
from pubmote.gateway.update.package import SEGMENT_BYTES, AppPackage
from pubmote.gateway.update.producer import UpdateProducer
from pubmote_wire import data, interest, name

KEY = bytes(range(32))


class Face:
    kind = "serial"

    def __init__(self) -> None:
        self.face_id = next_face_id()
        self.label = "face%d" % self.face_id
        self.up = True
        self.board: str | None = None
        self.tracer: Any = None
        self.sent: list[bytes] = []

    def send_packet(self, pkt: bytes) -> None:
        self.sent.append(pkt)

    def bad_frames(self) -> int:
        return 0


def _name(*parts: bytes) -> bytes:
    out = name.from_uri("/pubmote/update")
    for p in parts:
        out += p if p[:1] == b"\x32" else name.generic(p)
    return out


async def _ask(hub: Hub, face: Face, nm: bytes) -> data.Data | None:
    n = len(face.sent)
    hub.on_packet(face, interest.encode(nm, nonce=len(face.sent) + 1, lifetime_ms=1000))
    for _ in range(3):
        await asyncio.sleep(0)  # the producer answers on a later loop turn
    if len(face.sent) == n:
        return None
    return data.decode_data(face.sent[-1])


def test_the_producer_serves_a_board_its_update() -> None:
    async def run() -> None:
        hub = Hub(gateway="gw")
        hub.attach(auth=BoardAuth({"b1": KEY}, [], allow_anonymous=False))
        board = Face()
        hub.boards["b1"] = BoardState("b1", name.from_uri("/pubmote/node/b1"), board, 8)
        producer = UpdateProducer(hub, next_face_id())
        pkg = AppPackage([("app.py", bytes(range(256)) * 8)], "app")  # 2048 B: 3 segments
        u = producer.offer("b1", pkg, 30, 5)
        assert producer.trigger(u)
        call = interest.decode_interest(board.sent[-1])
        assert bytes(call.name) == name.from_uri("/pubmote/ctl/update") + name.generic(
            pkg.version.encode())
        v = pkg.version.encode()
        d = await _ask(hub, board, _name(b"b1", v, b"m"))
        assert d is not None and data.verify_data(d, board.sent[-1], KEY)
        assert not data.verify_data(d, board.sent[-1], b"\x00" * 32)
        man = json.loads(bytes(d.content))
        assert (man["v"], man["n"], man["seg"], man["size"]) == (pkg.version, 3,
                                                                   SEGMENT_BYTES, 2048)
        assert man["sha"] == pkg.sha and man["config"] == {"app": "app"}
        d = await _ask(hub, board, _name(b"b1", v, b"s", name.segment(2)))
        assert d is not None and data.verify_data(d, board.sent[-1])  # DigestSha256
        assert bytes(d.content) == pkg.blob[2 * SEGMENT_BYTES:]
        assert bytes(d.final_block_id) == name.segment(2)
        assert u.state == "fetching" and u.bytes == 2048 - 2 * SEGMENT_BYTES
        assert await _ask(hub, board, _name(b"b1", v, b"s", name.segment(3))) is None
        assert await _ask(hub, board, _name(b"b1", b"other", b"m")) is None
        # a report for b1 from another face is not taken; from b1's own face it is
        other = Face()
        assert await _ask(hub, other, _name(b"b1", v, b"r", b"healthy", b"-")) is None
        assert u.state == "fetching"
        assert await _ask(hub, board, _name(b"b1", v, b"r", b"rolledback",
                                            b"ValueError: x")) is not None
        assert (u.state, u.why) == ("rolledback", "ValueError: x")
        producer.close()
        await hub.close()

    asyncio.run(run())


def test_every_package_of_the_same_app_has_its_own_version() -> None:
    # the same folder sent again at once (a retry, a second roll-out) is a new update: the
    # board refuses one whose version it already runs or keeps as its previous app
    files = [("app.py", b"print(1)\n")]
    versions = {AppPackage(files, "app").version for _ in range(1000)}
    assert len(versions) == 1000
    assert all(v.startswith(AppPackage(files, "app").sha[:8]) for v in versions)
