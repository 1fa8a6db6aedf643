"""FaceWatch closes the faces that never register or go quiet, but not a board whose
registration has arrived and waits unread in its socket when the check comes due (a loop
busy with a flood on a loaded machine)."""

from __future__ import annotations

import asyncio
import socket

from pubmote.core.limits import LimitHits
from pubmote.faces.board import BoardFace
from pubmote.faces.stream import StreamFace
from pubmote.faces.watch import FaceWatch
from pubmote_wire import framing


def test_sweep_reads_what_arrived_before_closing_a_face_that_never_registered() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        hits = LimitHits()
        # due at once: every face is past its register timeout when the sweep runs
        watch = FaceWatch(register_timeout_s=0.0, idle_timeout_s=3600.0, hits=hits)

        def registers(face: BoardFace, pkt: bytes) -> None:
            face.board = pkt.decode()  # the hub's part: a registration names the board

        faces: list[StreamFace] = []
        peers: list[socket.socket] = []
        for _ in range(2):
            here, there = socket.socketpair()
            face = StreamFace(registers, lambda face: None, watch=watch)
            await loop.connect_accepted_socket(lambda f=face: f, here)
            faces.append(face)
            peers.append(there)
        talker, silent = faces
        # the registration is in the socket, not yet read: the loop has not turned since
        peers[0].sendall(framing.encode(b"board1"))
        await watch.sweep()
        assert talker.board == "board1" and talker.up, "a registered board was closed"
        assert not silent.up, "a face that never registered stayed open"
        assert hits.counts == {"board_register_timeout_s": 1}, hits.counts
        for f in faces:
            f.close()
        for p in peers:
            p.close()

    asyncio.run(main())
