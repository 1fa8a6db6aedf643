# The board's end of link batches (docs/protocols/link-batch.md), loaded only once a bridge
# accepts them at registration: publishes gather into one BATCH frame and one ACKS frame
# wakes every publisher it answers. Per message this costs a record copied into a buffer
# and one task wake-up: no NDN packet, digest or timer, and one Event per buffer of records.
#
# Heap (the emulated Pico's bench): one record buffer, framed into the port's frame
# buffer once the link is free, so the records buffer is free again before the write; no
# flusher task: the publisher whose record opened the buffer writes it.
import asyncio

from pubmote_wire import batch, name
from pubmote_wire.compat import const, urandom

from .clock import ticks_diff, ticks_ms  # the port's, or CPython's stand-ins
from .face import Event

# one BATCH frame's bytes: framed, it fills the port's 258-byte frame buffer
# (framing.FRAME_PART_MIN, frame_size_max(252) == 258). A 115200-baud UART carries ~4
# small records per round trip, and a pty or socket two writes per 32-message window
_CAP = const(252)
# messages in flight by default: one ack frame answers a whole window, so the line's round
# trip is shared by this many messages (config "max_soft" overrides it, as for NDN notifies)
_WINDOW = const(32)


class Batcher:
    """Publishes of one node as BATCH records; on is False while the bridge refuses them.
    timed: timed BATCH frames, each record with its publish ticks (the form the bridge
    agreed to at registration). What it uses of the node: config, counters, timeout_ms,
    its port's up and send(), and its session's clock."""

    def __init__(self, node, timed):
        self._node = node
        self.on = True
        self.timed = timed
        r = urandom(4)
        # a new epoch per boot: the bridge tells this board's retransmissions (same epoch
        # and seq) from a rebooted board's new messages that reuse a seq
        self.epoch = ((r[0] & 0x3F) << 24) | (r[1] << 16) | (r[2] << 8) | r[3]
        self._seq = 0
        # the records; two spare bytes: the frame's CRC goes there (batch.frame_inplace)
        self._buf = bytearray(_CAP + 2)
        self._h = batch.begin(self._buf, batch.BATCH_T if timed else batch.BATCH, self.epoch)
        self._n = self._h
        self._last = None  # the topic of the buffer's last record
        self._topic = None  # the last topic published, and its Name
        self._tname = None
        # the seq whose publisher writes the buffer (it opened it), -1 while it is empty
        self._writer = -1
        # seq -> True once acked, else the Event its publisher waits on (None until its
        # record is in a buffer): the Event of the buffer its record went into, so an ACKS
        # frame wakes only the publishers it answers (one Event for the whole window would
        # wake every waiting publisher at every frame)
        self._state = {}
        self._bytes = 0
        self._ev = None  # the open buffer's Event (made by the record that opens it)
        # set once a full buffer has been framed (made only while a publisher waits for that)
        self._room = None
        self._ticking = False  # a ticker task runs (only while publishers wait for acks)

    async def publish(self, topic, payload, stamp):
        """As Node.publish (stamp: ticks_ms() when the app published it); a message too big
        for a batch goes as an NDN notify (the node's _notify)."""
        node = self._node
        port = node.port
        cfg = node.config
        if topic != self._topic:
            self._tname = name.from_uri(topic if isinstance(topic, str) else topic.decode())
            self._topic = topic
        tname = self._tname
        size = batch.record_size(tname, payload, False, self.timed)
        if size > _CAP - self._h or not tname or len(tname) > batch.TOPIC_MAX:
            return await node._notify(topic, payload, stamp)  # noqa: SLF001 - its node's
        st = self._state
        if (len(st) >= cfg.get("max_soft", _WINDOW)
                or self._bytes + size > cfg.get("max_soft_bytes", 4096)):
            node.counters["soft_full"] += 1
            return False
        seq = self._seq
        self._seq = (seq + 1) & batch.SEQ_MASK
        st[seq] = None  # not in a buffer yet
        self._bytes += size
        node.counters["published"] += 1
        try:
            for _ in range(cfg.get("retries", 3) + 1):
                while not self._put(seq, tname, payload, size, stamp):
                    room = self._room  # full: its writer frames it soon
                    if room is None:
                        room = self._room = Event()
                    await room.wait()
                if self._writer == seq:
                    await self._write(seq)
                if not self._ticking:
                    self._ticking = True
                    asyncio.create_task(self._ticker())
                t0 = ticks_ms()
                while True:
                    ev = st[seq]
                    if (ev is True or not port.up
                            or ticks_diff(ticks_ms(), t0) >= node.timeout_ms):
                        break
                    await ev.wait()  # set only once st[seq] is acked or replaced (on_acks)
                if st[seq] is True:
                    node.counters["acked"] += 1
                    return True
                if not port.up:
                    break
            node.counters["publish_failed"] += 1
            return False
        finally:
            del st[seq]
            if not st:
                st.clear()  # a dict keeps its grown table when emptied: the last one frees it
            self._bytes -= size

    def _put(self, seq, tname, payload, size, stamp):
        # add the record to the buffer if it has room (no coroutine: the common case); the
        # record that opens the buffer makes its publisher the writer. The record is
        # batch.add_record's, written here: publish has checked what add_record would
        # (topic 1..255 bytes, the record fits a batch), and this runs once per message
        n = self._n
        same = tname is self._last
        tn = 0 if same else len(tname)
        end = n + size - len(tname) + tn
        if end > _CAP:
            return False
        buf = self._buf
        pack_into = batch.pack_into  # batch's import of it: no global of our own
        if self.timed:
            pack_into(">IIB", buf, n, seq, stamp & batch.SEQ_MASK, tn)
            n += 9
        else:
            pack_into(">IB", buf, n, seq, tn)
            n += 5
        if tn:
            buf[n : n + tn] = tname
            n += tn
        pack_into(">H", buf, n, len(payload))
        buf[n + 2 : end] = payload
        self._n = end
        self._last = tname
        if self._writer < 0:
            self._writer = seq
        ev = self._ev
        if ev is None:
            ev = self._ev = Event()
        self._state[seq] = ev
        return True

    async def _write(self, seq):
        # one turn first: the publishers an ack frame woke all add their records before
        # the frame is made, and so do those that come while the link is busy
        try:
            await asyncio.sleep(0)
            await self._node.port.send(None, self._frame_records)
        except OSError:
            pass  # link down: the publishers time out and send again
        finally:
            if self._writer == seq:  # not framed (link down, or cancelled): drop them
                self._frame_records(None)

    def _frame_records(self, out):
        # the port's frame buffer is ours (the link is): frame the records into it and
        # empty the records buffer (out None: only empty it). A timed frame gets the
        # board's time now, against which its records' ticks are read
        n = self._n
        k = 0
        if out is not None and n > self._h:
            if self.timed:
                now = ticks_ms()
                batch.set_clock(self._buf, self._node.session.clock.value(now), now)
            k = batch.frame_inplace(out, 0, self._buf, n)
        self._n = self._h
        self._last = None
        self._writer = -1
        self._ev = None  # the next buffer's records wait on an Event of their own
        room = self._room
        if room is not None:
            self._room = None
            room.set()
        return k

    async def _ticker(self):
        # wakes the publishers waiting for acks to look at their timeouts; it ends when none
        # waits (an idle board holds no task for it; a busy one keeps the same one)
        while True:
            await asyncio.sleep(0.1)
            if not self._state:
                self._ticking = False
                return
            self.on_acks(None)

    def on_acks(self, pkt):
        """An ACKS frame from the bridge: mark its seqs acked and wake their publishers
        (pkt None: wake every waiting publisher, to look at its timeout)."""
        st = self._state
        woke = False  # the Event set, when only one was (a frame acking one buffer)
        many = pkt is None
        if pkt is not None:
            k = batch.ack_runs(pkt)
            if batch.epoch_of(pkt) != self.epoch:
                return
            for i in range(k):
                first, count = batch.ack_run(pkt, i)
                end = first + count
                for s in st:  # at most a window's seqs, however long the run
                    ev = st[s]
                    if ev is not True and first <= s < end:
                        st[s] = True
                        if ev is not None and ev is not woke:
                            ev.set()
                            if woke is False:
                                woke = ev
                            else:
                                many = True
            if woke is False:
                return
        else:
            for s in st:
                ev = st[s]
                if ev is not True and ev is not None:
                    ev.set()
        # a publisher whose Event was set but whose seq is not acked (the tick, or a frame
        # that acked part of a buffer) waits again on a new one: a set Event never blocks
        ev = None
        for s in st:
            old = st[s]
            if old is woke or (many and old is not True and old is not None and old.is_set()):
                if ev is None:
                    ev = Event()
                st[s] = ev
        if self._ev is not None and self._ev.is_set():
            self._ev = ev if ev is not None else Event()
