"""The bridge's own Python per relayed message, without sockets or an event loop's waits:
N board faces registered with link batches, each fed BATCH frames of R records, through
the hub to an SP PUB endpoint whose subscriber's transport takes everything. Prints the
time per message and, with --profile, cProfile's hottest functions (cProfile slows
call-heavy code, so its shares lean toward many small calls). Not part of make bench:
`python bench/gateway/hotpath.py [--boards N] [--records R] [--profile]`."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import time

from pubmote.core.hub import Hub
from pubmote.faces import sp as sp_face
from pubmote.faces.board import BoardFace
from pubmote_wire import batch, control, framing, sp
from pubmote_wire import name as ndn_name


class _Face(BoardFace):
    kind = "tcp"

    def _write_raw(self, frame: bytes) -> bool:
        return True


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


async def run(boards: int, records: int, rounds: int, profile: bool) -> None:
    hub = Hub()
    ep = sp_face.SpEndpoint(hub, "tcp://127.0.0.1:1", sp.PUB)
    hub.add_listener(ep.relay)
    hub.add_flusher(ep.flush)  # as SpEndpoint.start does
    conn = sp_face.SpConn(ep)
    conn.t = _Transport()  # type: ignore[assignment]
    conn.ready = True
    ep.conns.add(conn)
    faces = []
    for i in range(boards):
        f = _Face("tcp:%d" % i, hub.on_packet, hub.face_state)
        f.set_up(True)
        name = "v%d" % i
        params = control.register_params(name, "/pubmote/node/" + name, [], [], True, None,
                                         None)
        buf = bytearray(len(params) + 256)
        n = control.encode_register(buf, 0, name.encode(), params, -1, 4000, None, None, None)
        f.feed(framing.encode(bytes(buf[:n])))
        faces.append(f)
    if not all(b.batch for b in hub.boards.values()):
        raise SystemExit("the hub did not take link batches")
    topic = ndn_name.from_uri("/bench/v0")
    frames = []
    for r in range(rounds):
        buf = bytearray(64 + records * 48)
        off = batch.begin(buf, batch.BATCH, 12345)
        for k in range(records):
            seq = r * records + k
            off = batch.add_record(buf, off, seq, topic, b"%d %d" % (seq, time.time_ns()),
                                   k > 0)
        frames.append(framing.encode(bytes(buf[:off])))

    def feed_all() -> None:
        for fr in frames:
            for f in faces:
                f.feed(fr)
            hub.flush_relays()  # the end of a loop turn: SP writes, then the acks

    before = hub.counters["messages"]
    t0 = time.perf_counter()
    feed_all()
    dt = time.perf_counter() - t0
    relayed = hub.counters["messages"] - before
    print("%d boards, %d record(s) per batch: %.2f us per relayed message (%d relayed, load "
          "average %.1f)" % (boards, records, dt * 1e6 / max(1, relayed), relayed,
                             os.getloadavg()[0]))
    if profile:
        hub.forget_fetched()  # the same frames are new messages again
        prof = cProfile.Profile()
        prof.enable()
        feed_all()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--boards", type=int, default=100)
    ap.add_argument("--records", type=int, default=1, help="records per BATCH frame")
    ap.add_argument("--rounds", type=int, default=200, help="frames fed to each board")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    asyncio.run(run(args.boards, args.records, args.rounds, args.profile))


if __name__ == "__main__":
    main()
