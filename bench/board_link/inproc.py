# In-process bench of the board's publish path (MicroPython): the firmware's Batcher behind
# a stand-in node whose link decodes each BATCH frame and answers with one ACKS frame a
# task turn later, as a bridge would; `lanes` publishing tasks as in pubmote_pub.py. No pty,
# no bridge process: the board's own CPU per acked message, free of the machine's load.
# Run: micropython bench/board_link/inproc.py [lanes] [messages]  (paths as run.py sets)
import asyncio
import sys
from time import ticks_diff, ticks_ms, ticks_us

from pubmote_node.batch_link import Batcher
from pubmote_node.clock import Clock
from pubmote_wire import batch


class _Node:
    # just what Batcher uses of a Node: config, counters, timeout_ms, port (itself here: up
    # and send) and session.clock (itself, synced: timed batches, as boards send them)
    def __init__(self):
        self.session = self
        self.clock = Clock()
        self.clock.sync(1700000000000, ticks_ms(), ticks_ms())
        self.config = {}
        self.counters = {"soft_full": 0, "published": 0, "acked": 0, "publish_failed": 0}
        self.up = True
        self.port = self
        self.timeout_ms = 2000
        self._out = bytearray(258)
        self._free = asyncio.Event()
        self._free.set()
        self.batcher = None
        self._acks = bytearray(64)
        self.frames = 0
        self._delivering = set()  # the ACKS in flight, held until delivered

    async def send(self, pkt, framer):
        while not self._free.is_set():
            await self._free.wait()
        self._free.clear()
        try:
            seqs = self._seqs()  # read before framing empties the records buffer
            if framer(self._out):
                self.frames += 1
                await asyncio.sleep(0)  # the write
                k = batch.begin(self._acks, batch.ACKS, self.batcher.epoch)
                k = batch.add_acks(self._acks, k, seqs)
                self._delivering.add(asyncio.create_task(self._deliver(bytes(self._acks[0:k]))))
        finally:
            self._free.set()

    def _seqs(self):
        # the seqs of the records buffer (seq, ticks, topic length, topic, payload length,
        # payload)
        buf = self.batcher._buf
        p = batch.HEADER_T
        out = []
        while p < self.batcher._n:
            out.append((buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3])
            q = p + 9 + buf[p + 8]
            p = q + 2 + ((buf[q] << 8) | buf[q + 1])
        return out

    async def _deliver(self, pkt):
        await asyncio.sleep(0)
        self._delivering.discard(asyncio.current_task())
        self.batcher.on_acks(pkt)


async def _lane(b, state, count):
    while state[0] < count:
        seq = state[0]
        state[0] = seq + 1
        if await b.publish("/bench/board1/data", b"%d %d" % (seq, ticks_us()), ticks_ms()):
            state[1] += 1


async def main(lanes, count):
    node = _Node()
    b = node.batcher = Batcher(node, True)
    state = [0, 0]
    await asyncio.gather(*[_lane(b, state, 200) for _ in range(lanes)])  # warm-up
    state = [0, 0]
    t0 = ticks_us()
    await asyncio.gather(*[_lane(b, state, count) for _ in range(lanes)])
    us = ticks_diff(ticks_us(), t0)
    print("lanes=%d acked=%d us_per_msg=%.2f records_per_frame=%.1f"
          % (lanes, state[1], us / max(1, state[1]), (count + 200) / max(1, node.frames)))


lanes = int(sys.argv[1]) if len(sys.argv) > 1 else 32
count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
asyncio.run(main(lanes, count))
