# The board's NDN face on its link to the bridge. Port moves frames: out one at a time
# (whole, or in parts that fit one COBS block's buffer on a byte stream), in through the
# deframer, each packet handed on as it is found. Exchange moves packets: each one in by its
# type, and the Interests this board expresses, each waiting (keyed by its full name, at
# most 16 at once) for its Data, a Nack or its lifetime; it makes the scratch buffer each
# packet of the board is encoded into. A link fault is an OSError; a packet the board cannot
# read is counted (bad_packets), never raised. (Two classes in one module: each module is
# heap on a board, frozen or not.)
import asyncio

from pubmote_wire import framing, tlv
from pubmote_wire import interest_core as interest
from pubmote_wire.compat import const
from pubmote_wire.errors import DecodeError

try:
    from asyncio import core
except ImportError:  # CPython: no asyncio.core, its own Event
    core = None

MAX_PACKET = const(1024)  # largest NDN packet on the link; bigger payloads are refused
# the deframer's buffer starts this small and grows to MAX_PACKET, for good, at the first
# frame over it: acks, notifies and small messages' Data fit
_RX_START = const(256)
_READ = const(256)  # bytes a read takes of a byte stream
_PENDING_MAX = const(16)
# a packet's scratch buffer is this big until the first packet that needs MAX_PACKET, then
# that: a board that only sends small messages (a sensor's readings, a command) never
# makes the 1 kB a big packet takes. Registrations, fetches and a small message's notify
# with its Data fit
_TX_START = const(320)
# TLV types: the packets (interest.INTEREST, data.DATA, lp.LP_PACKET, batch.ACKS) as
# constants of this module (no heap; lp and batch are not loaded to be compared with), and
# a Name
_T_INTEREST = const(0x05)
_T_DATA = const(0x06)
_T_LP_PACKET = const(0x64)
_T_ACKS = const(0xC1)
_T_NAME = const(0x07)
# one outstanding Interest: [Event, Data, its packet] (a list, not a class: a class object
# costs the board's heap more than its records do)
_EV = const(0)
_DATA = const(1)
_PKT = const(2)


if core is None:
    Event = asyncio.Event

    async def wait_ms(ev, ms):
        """Wait for ev, at most ms: a timer task sets it (asyncio.wait_for would make a task
        and a closure per wait besides)."""
        timer = asyncio.create_task(_set_after(ev, ms))
        try:
            await ev.wait()
        finally:
            timer.cancel()

    async def _set_after(ev, ms):
        await asyncio.sleep(ms / 1000)
        ev.set()

else:

    class Event:
        """asyncio.Event as MicroPython's asyncio makes it (is_set, set, clear, wait), the
        board's own: asyncio.Event loads asyncio/event.py, whose module, Event and
        ThreadSafeFlag classes hold ~0.6 kB of a board's heap for good; this class ~0.2."""

        def __init__(self):
            self.state = False
            self.waiting = core.TaskQueue()

        def is_set(self):
            return self.state

        # the task in wait_ms() (below), asleep in asyncio's queue until its time is up
        timed = None

        def set(self):
            w = self.waiting
            q = core._task_queue  # noqa: SLF001 - as asyncio's own Event
            while w.peek():
                q.push(w.pop())
            t = self.timed
            if t is not None:
                self.timed = None
                # its sleep cut short: it runs now (unless cancelled: then it is at the
                # front already, and a push would clear the CancelledError its data holds)
                if t.data is None:
                    q.remove(t)
                    q.push(t)
            self.state = True

        def clear(self):
            self.state = False

        def wait(self):
            # a generator, as asyncio's: the task waits in the queue, which its data names
            # so that cancelling it takes it out
            if not self.state:
                t = core.cur_task
                self.waiting.push(t)
                t.data = self.waiting
                yield
            return True

    def wait_ms(ev, ms):
        """Wait for ev, at most ms (one task at a time per Event): the task sleeps ms in
        asyncio's queue, and ev.set() moves it to the front. No timer task, nor its frame
        (asyncio.wait_for would load funcs.py, ~0.4 kB of the board's heap, and make a task
        and a closure per wait besides); cancelling the task ends its sleep, as any."""
        if ev.state:
            return
        t = core.cur_task
        ev.timed = t
        try:
            yield from core.sleep_ms(int(ms))
        finally:
            if ev.timed is t:
                ev.timed = None


class Port:
    """Frames on one link: send() writes a frame once the link is free, read_loop() hands
    each packet read to its handler. `up` is False until open() and after a fault."""

    def __init__(self, counters, link, udp):
        self.counters = counters  # counts sent_frames
        self.link = link  # the link to open: given, else made by the session at run()
        self.up = False
        # a byte stream takes a frame in parts: a buffer of one COBS block, not of a whole
        # frame. UDP (one frame per datagram) and a link given here get the whole frame
        whole = link is not None or udp
        self._out = bytearray(framing.frame_size_max(MAX_PACKET) if whole
                              else framing.FRAME_PART_MIN)
        # a read takes a whole datagram on UDP (a smaller buffer would cut its frame), 256
        # bytes of a byte stream (not 128: a unix-port board publishing NDN notifies 4 at a
        # time ran out of its heap with 128-byte reads)
        self._rx = bytearray(framing.frame_size_max(MAX_PACKET) if udp else _READ)
        self.decoder = framing.FrameDecoder(framing.frame_size_max(MAX_PACKET), start=_RX_START)
        # one frame at a time on the link (frames go in parts): busy while one is written,
        # and an Event (made only while a frame waits its turn) set once it is done, not an
        # asyncio.Lock, whose module would cost the board ~370 B of heap
        self._busy = False
        self._free = None

    async def open(self, link):
        """Open link and take it as this port's (OSError if it cannot be opened)."""
        await link.open()
        self.link = link
        self.up = True

    def close(self):
        self.up = False
        self.link.close()

    def frames_bad(self):
        """Frames the deframer dropped: bad CRC, bad COBS, oversize."""
        d = self.decoder
        return d.frames_bad_crc + d.frames_bad_cobs + d.frames_oversize

    async def send(self, pkt, framer=None):
        """Write pkt as one frame once the link is free; OSError while it is down.

        framer (link batches): framer(buf) frames what it holds into buf once the link is
        ours and returns the frame's length, written at once (0: nothing to write)."""
        if not self.up:
            raise OSError("link down")
        while self._busy:
            ev = self._free
            if ev is None:
                ev = self._free = Event()
            await ev.wait()
        if not self.up:  # closed while this frame waited its turn
            raise OSError("link down")
        self._busy = True
        out = self._out
        try:
            if framer is not None:
                n = framer(out)
                if n:
                    await self.link.write(memoryview(out)[0:n])
                pos = -1
            else:
                crc = framing.crc16(pkt)
                pos = 0
            while pos >= 0:  # one part when the frame fits the buffer
                n, pos = framing.encode_frame_part(out, pkt, crc, pos)
                await self.link.write(memoryview(out)[0:n])
            self.counters["sent_frames"] += 1
        finally:
            self._busy = False
            ev = self._free
            if ev is not None:  # every frame waiting looks again (the first one goes)
                self._free = None
                ev.set()

    async def send_quiet(self, pkt):
        """send(), the packet dropped if the link is down (its sender retries, or not)."""
        try:
            await self.send(pkt)
        except OSError:
            pass

    async def read_loop(self, on_packet, wake):
        """Read until the link ends or fails, on_packet(view) for each packet (the view is
        valid during the call only); then the port is down and wake is set."""
        link = self.link
        rx = self._rx
        mv = memoryview(rx)
        while True:
            try:
                n = await link.readinto(rx)
            except Exception:  # noqa: BLE001 - any link fault: reopen rather than hang
                n = 0
            if not n:
                self.up = False
                wake.set()  # the session notices at once
                return
            # each packet handled as the decoder finds it: no list of packets, and none
            # held by this frame while it waits for the next bytes
            self.decoder.feed_cb(mv[0:n], on_packet)


class Exchange:
    """Express an Interest encoded in the scratch buffer and wait for its Data; on_packet()
    takes every packet in: Data and Nacks end the waits, Interests go to on_interest(pkt)."""

    def __init__(self, port, counters, on_interest):
        self.pending = {}  # full Interest name -> [Event, Data, packet]
        # the scratch buffer: encode() makes and writes it, copy() reads it and lets it go
        # (one held between packets would be ~0.3 kB of the board's heap for good)
        self.tx = None
        self.tx_size = _TX_START
        self._port = port
        self._counters = counters  # counts pending_full, nacks, bad_packets
        self._on_interest = on_interest

    def encode(self, fn, *args, **kw):
        """fn(buf, 0, *args, **kw) into a new scratch buffer; returns the packet's length
        (the packet is tx[0:n] until the next encode or copy)."""
        while True:
            self.tx = bytearray(self.tx_size)
            try:
                return fn(self.tx, 0, *args, **kw)
            except ValueError:  # EncodeError: the buffer is too small, or the packet is
                self.tx = None
                if self.tx_size >= MAX_PACKET:
                    raise
                self.tx_size = MAX_PACKET

    def copy(self, n):
        """The packet encoded last (n bytes), as bytes of its own; the scratch let go."""
        pkt = bytes(memoryview(self.tx)[0:n])
        self.tx = None
        return pkt

    async def express(self, n, timeout_ms, keep=False):
        """Send the Interest encoded last (n bytes); wait for its Data (None on timeout,
        Nack, link down or too many outstanding); with keep, return [Event, Data, packet].

        The packet is copied before the first await: other tasks encode too."""
        pkt = self.copy(n)
        full = _interest_name(pkt, n)
        pending = self.pending
        if full in pending or len(pending) >= _PENDING_MAX:
            self._counters["pending_full"] += 1
            return None
        p = [Event(), None, None]
        pending[full] = p
        try:
            await self._port.send(pkt)
            await wait_ms(p[_EV], timeout_ms)
            if p[_DATA] is None:  # timed out, or Nacked
                return None
            return p if keep else p[_DATA]
        except OSError:
            return None
        finally:
            pending.pop(full, None)
            # a dict keeps its grown table when emptied: after a burst of fetches (up to
            # 16 pending) the last one out frees it (clear() does; ~100 B back)
            if not pending:
                pending.clear()

    def on_packet(self, pkt, batch):
        """Take one packet from the bridge: Data and Nacks end the wait of the Interest they
        name, an Interest goes to on_interest(pkt), ACKS to batch (None: the board sends no
        link batches), an LpPacket's fragment is taken as a packet of its own. pkt is a view
        of the deframer's buffer: ACKS are read in place, any other packet is copied, as it
        is kept or parsed by the NDN codec."""
        try:
            typ = pkt[0] if pkt else -1
            if typ != _T_ACKS:
                pkt = bytes(pkt)
            if typ == _T_DATA:
                d = _decode_data(pkt)
                p = self.pending.get(bytes(d.name))
                if p is not None:
                    p[_DATA] = d
                    p[_PKT] = pkt
                    p[_EV].set()
            elif typ == _T_INTEREST:
                self._on_interest(pkt)
            elif typ == _T_ACKS:
                if batch is not None:
                    batch.on_acks(pkt)
            elif typ == _T_LP_PACKET:
                nack, fragment = _lp_parts(pkt)
                if nack and fragment is not None:
                    self._counters["nacks"] += 1
                    p = self.pending.get(bytes(interest.decode_interest(fragment).name))
                    if p is not None:
                        p[_EV].set()  # its wait ends, failed
                elif fragment is not None:
                    self.on_packet(fragment, batch)
            else:
                raise DecodeError("not an NDN packet")
        except DecodeError:
            self._counters["bad_packets"] += 1

    def fail_all(self):
        """The link is down: every wait ends now, failed."""
        for p in self.pending.values():
            p[_EV].set()
        self.pending = {}


def _interest_name(buf, n):
    r = tlv.TLVReader(buf, 0, n)
    r.expect(_T_INTEREST)
    r2 = tlv.TLVReader(buf, r.vstart, r.vend)
    r2.expect(_T_NAME)
    return bytes(buf[r2.vstart : r2.vend])


def _decode_data(pkt):
    from pubmote_wire.data_core import decode_data

    return decode_data(pkt)


def _lp_parts(pkt):
    # (a Nack?, the Fragment as bytes or None) of an NDNLPv2 packet. LpPackets reach a board
    # only as the bridge's Nack of a fetch it no longer serves, now and then: lp is loaded
    # for one and, if this loaded it, let go again: kept, it would hold ~1 kB of heap for
    # good from the first Nack on (a step in the board's steady state)
    import sys

    loaded = "pubmote_wire.lp" in sys.modules
    from pubmote_wire import lp

    try:
        pk = lp.decode_lp(pkt)
        fragment = bytes(pk.fragment) if pk.fragment is not None else None
        return pk.nack_reason is not None, fragment
    finally:
        if not loaded:
            from . import forget

            forget("pubmote_wire.lp")
