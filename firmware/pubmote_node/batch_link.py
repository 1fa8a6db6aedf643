# The board's end of link batches (docs/protocols/link-batch.md), loaded only once a bridge
# accepts them at registration: publishes gather into one BATCH frame that one flusher task
# writes, and one ACKS frame wakes every publisher it answers. Per message this costs a
# record copied into a buffer and one task wake-up: no NDN packet, digest, Event or timer.
import asyncio
import time

from pubmote_wire import batch, framing, name
from pubmote_wire.compat import const
from pubmote_wire.rand import urandom

try:
    from time import ticks_diff, ticks_ms
except ImportError:  # CPython, for host-side tests of the node

    def ticks_ms():
        return int(time.monotonic() * 1000)

    def ticks_diff(a, b):
        return a - b

_CAP = const(480)  # one BATCH frame's bytes: a few small messages, within one link packet
# messages in flight by default: one ack frame answers a whole window, so the line's round
# trip is shared by this many messages (config "max_soft" overrides it, as for NDN notifies)
_WINDOW = const(32)
_TICK_S = 0.1  # publishers waiting for acks look at their timeout this often


class Batcher:
    """Publishes of one node as BATCH records; on is False while the bridge refuses them."""

    def __init__(self, node):
        self._node = node
        self.on = True
        r = urandom(4)
        # a new epoch per boot: the bridge tells this board's retransmissions (same epoch
        # and seq) from a rebooted board's new messages that reuse a seq
        self.epoch = ((r[0] & 0x3F) << 24) | (r[1] << 16) | (r[2] << 8) | r[3]
        self._seq = 0
        # two spare bytes each: the frame's CRC goes there (batch.frame_inplace)
        self._bufs = (bytearray(_CAP + 2), bytearray(_CAP + 2))
        for b in self._bufs:
            batch.begin(b, batch.BATCH, self.epoch)
        self._frame = bytearray(framing.frame_size_max(_CAP))  # a batch in one write
        self._cur = 0
        self._n = batch.HEADER
        self._last = None  # the topic of the current buffer's last record
        self._topic = None  # the last topic published, and its Name
        self._tname = None
        self._window = node.config.get("max_soft", _WINDOW)
        self._state = {}  # seq -> acked yet?
        self._bytes = 0
        self._gen = asyncio.Event()  # set, and replaced, at every ack frame and tick
        self._go = asyncio.Event()  # records wait in the buffer
        self._room = asyncio.Event()  # the flusher has taken a full buffer
        asyncio.create_task(self._flusher())
        asyncio.create_task(self._ticker())

    async def publish(self, topic, payload):
        """As Node.publish; None if the message is too big for a batch (then the node
        publishes it as an NDN notify)."""
        node = self._node
        if topic != self._topic:
            self._tname = name.from_uri(topic if isinstance(topic, str) else topic.decode())
            self._topic = topic
        tname = self._tname
        size = batch.record_size(tname, payload)
        if size > _CAP - batch.HEADER or not tname or len(tname) > batch.TOPIC_MAX:
            return None
        st = self._state
        if (len(st) >= self._window
                or self._bytes + size > node.config.get("max_soft_bytes", 4096)):
            node.counters["soft_full"] += 1
            return False
        seq = self._seq
        self._seq = (seq + 1) & batch.SEQ_MASK
        st[seq] = False
        self._bytes += size
        node.counters["published"] += 1
        try:
            for _ in range(node.config.get("retries", 3) + 1):
                if not self._put(seq, tname, payload):
                    await self._add(seq, tname, payload)
                t0 = ticks_ms()
                while not st[seq] and node._up and ticks_diff(ticks_ms(), t0) < node.timeout_ms:
                    await self._gen.wait()
                if st[seq]:
                    node.counters["acked"] += 1
                    return True
                if not node._up:
                    break
            node.counters["publish_failed"] += 1
            return False
        finally:
            del st[seq]
            self._bytes -= size

    def _put(self, seq, tname, payload):
        # add the record to the buffer if it has room (no coroutine: the common case)
        n = self._n
        same = tname is self._last
        if n + batch.record_size(tname, payload, same) > _CAP:
            return False
        self._n = batch.add_record(self._bufs[self._cur], n, seq, tname, payload, same)
        self._last = tname
        if n == batch.HEADER:
            self._go.set()
        return True

    async def _add(self, seq, tname, payload):
        while not self._put(seq, tname, payload):
            self._go.set()  # full: wait until the flusher takes it
            self._room.clear()
            await self._room.wait()

    async def _flusher(self):
        # writes whatever the publishers added since its last write: the publishers an
        # ack frame woke all run before it, so their records leave in one frame
        while True:
            await self._go.wait()
            self._go.clear()
            n = self._n
            if n <= batch.HEADER:
                continue
            buf = self._bufs[self._cur]
            self._cur ^= 1
            self._n = batch.HEADER
            self._last = None
            self._room.set()
            try:
                await self._node._send(self._frame, batch.frame_inplace(self._frame, 0, buf, n))
            except OSError:
                pass  # link down: the publishers time out and send again

    async def _ticker(self):
        while True:
            await asyncio.sleep(_TICK_S)
            if self._state:
                self._wake()

    def _wake(self):
        ev = self._gen
        self._gen = asyncio.Event()
        ev.set()

    def on_acks(self, pkt):
        """An ACKS frame from the bridge: mark its seqs acked and wake their publishers."""
        k = batch.ack_runs(pkt)
        if batch.epoch_of(pkt) != self.epoch:
            return
        st = self._state
        for i in range(k):
            first, count = batch.ack_run(pkt, i)
            end = first + count
            for s in st:  # at most a window's seqs, however long the run
                if first <= s < end:
                    st[s] = True
        self._wake()
