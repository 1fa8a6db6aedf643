"""FaceWatch closes the faces that never register or go quiet, but not a board whose
registration has arrived and waits unread in its socket when the check comes due (a loop
busy with a flood on a loaded machine), nor one whose keepalive waits there when its idle
timeout comes due."""

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
        # due at once: every face is past its register timeout when the sweep runs, and a
        # registered one heard from 10 s ago past its idle timeout
        watch = FaceWatch(register_timeout_s=0.0, idle_timeout_s=5.0, hits=hits)

        def registers(face: BoardFace, pkt: bytes) -> None:
            face.board = pkt.decode()  # the hub's part: a registration names the board

        faces: list[StreamFace] = []
        peers: list[socket.socket] = []
        for _ in range(3):
            here, there = socket.socketpair()
            face = StreamFace(registers, lambda face: None, watch=watch)
            await loop.connect_accepted_socket(lambda f=face: f, here)
            faces.append(face)
            peers.append(there)
        talker, silent, keeper = faces
        keeper.board = "board2"
        keeper.t_seen -= 10.0
        # the registration and the keepalive are in their sockets, not yet read: the loop
        # has not turned since
        peers[0].sendall(framing.encode(b"board1"))
        peers[2].sendall(framing.encode(b"board2"))
        await watch.sweep()
        assert talker.board == "board1" and talker.up, "a registered board was closed"
        assert keeper.up, "a board whose keepalive had arrived was closed as idle"
        assert not silent.up, "a face that never registered stayed open"
        assert hits.counts == {"board_register_timeout_s": 1}, hits.counts
        for f in faces:
            f.close()
        for p in peers:
            p.close()

    asyncio.run(main())
