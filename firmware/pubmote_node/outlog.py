# The durable outbox's log on the board's filesystem (config "outbox_dir"): what the outbox
# holds survives a reboot or a power cut. Append-only segment files <dir>/<n>, n counting
# up; a new one is begun once the current one would pass _SEG_BYTES (and at every boot, so
# nothing is ever appended after a torn tail). A segment is removed once every message in
# it has left the outbox (acked, dropped or given up), so the log holds the outbox's
# messages and at most two segments besides. Past the outbox's RAM bounds (config
# "outbox_log_bytes") the newest messages are in the log only: spilled() reads them back,
# oldest first, as the outbox takes them in, and size() is what that bound is checked on.
#
# A record: u16 n | u32 seq | u32 done | u8 k | k x (u16 len | bytes) | u16 crc, little
# endian except the CRC-16/CCITT (big endian, as on the link) over everything before it;
# n counts from seq to the last field. `done` is the outbox's cursor when the record was
# written: every message up to that seq had left it, so acks cost no write of their own
# (a message acked after the last record was written is sent again after a reboot: at
# least once, as on the link). The fields are opaque bytes: a field added to a message
# adds one to k, and a reader takes the fields it knows.
#
# A power cut mid-append loses that record only: replay stops a segment at its first
# record that is short or fails its CRC. One append is one open/write/close: on littlefs
# one commit (segments of _SEG_BYTES stay inline in their directory's metadata, so the
# commit does not copy a data block): docs/guarantees.md gives the flash writes measured.
import os
import struct

from pubmote_wire.compat import const
from pubmote_wire.framing import crc16

_SEG_BYTES = const(512)  # littlefs on the Pico keeps files up to 512 bytes inline
_HEAD = const(11)  # n, seq, done, k
_MIN = const(9)  # n of a record without fields


class OutLog:
    """replay() once, then append(fields) for each message queued and done() for each that
    leaves the head of the outbox (the log keeps the outbox's order: oldest first)."""

    def __init__(self, path):
        self._dir = path
        self._hdr = bytearray(_HEAD)  # one header buffer, patched in place
        self._next = 0  # the next record's seq
        self._done = -1  # every seq up to this one has left the outbox
        # seqs of the replayed messages still queued, oldest first, as runs: first, last,
        # first, last, ... (one run unless a torn record left a gap: a list per seq would
        # cost a long outage's log a block of heap)
        self._held = []
        # the segments are numbered first..cur (one may be missing: replay found a gap, or
        # none was appended to yet); no list of them, which a long outage's log would make
        # a block of heap too big for a fragmented board to find
        self._first = 0  # the oldest segment the log may hold
        self._first_last = -1  # the last seq in it (-1: none)
        self._nsegs = 0  # segment files the log holds
        self._cur = 0  # the segment appended to
        self._cur_last = -1  # the last seq appended to it (-1: none yet)
        self._cur_bytes = 0
        self._load_num = 0  # where spilled() starts looking
        # the durable outbox past its RAM's bounds (outbox.py): records from this seq on
        # are on flash only, taken into RAM as the outbox's head leaves; and the first seq
        # of this boot (ticks in the records before it mean nothing now)
        self._loaded = 0
        self._boot = 0

    def replay(self, hold=None):
        """The messages the log holds that had not left the outbox, oldest first, each a
        list of fields (bytes): handed to hold(fields) one by one as they are read (the
        outbox takes each in, and may drop the oldest meanwhile: done() as usual), so the
        log is never all in RAM at once; without hold, returned as a list. Removes
        segments with nothing left in them."""
        d = self._dir
        try:
            os.mkdir(d)
        except OSError:  # there already
            pass
        lo, hi = _numbers(d)
        # first the cursor and the seqs (no fields kept): a record's fields are held only
        # if the last cursor written is behind its seq
        done = -1
        top = -1
        nsegs = 0
        for num in range(lo, hi + 1) if lo >= 0 else ():
            last = -1
            buf = self._seg(num)
            if buf is not None:
                nsegs += 1
            for r in _records(buf or b""):
                done = max(done, r[2])
                top = max(top, r[1])
                last = r[1]
            if num == lo:
                self._first_last = last
        self._next = top + 1
        self._cur = hi + 1
        self._first = lo if lo >= 0 else self._cur
        self._nsegs = nsegs
        # the cursor: as last written while messages are left (done() moves it through
        # their seqs), else at the newest record, so that new seqs follow it one by one
        self._done = done
        out = [] if hold is None else None
        held = self._held
        self._loaded = -1  # (until hold leaves one on flash)
        for num in range(lo, hi + 1) if lo >= 0 else ():
            for r in _records(self._seg(num) or b""):
                if r[1] > done:
                    if held and held[-1] == r[1] - 1:
                        held[-1] = r[1]
                    else:
                        held.append(r[1])
                        held.append(r[1])
                    if out is not None:
                        out.append(r[3])
                    elif hold(r[3]) is False and self._loaded < 0:
                        self._loaded = r[1]  # it and those after it stay on flash
                        self._load_num = num
        if self._loaded < 0:
            self._loaded = self._next
            self._load_num = self._cur
        self._boot = self._next
        if not held:
            self._done = top
        self._trim()
        return out

    def _read(self, num):
        with open(self._path(num), "rb") as f:
            return f.read()

    def _seg(self, num):
        # segment num's bytes, None if there is none (a gap in the numbers, or not begun)
        try:
            return self._read(num)
        except OSError:
            return None

    def append(self, fields, held=True):
        """Log one message (a list of bytes fields) as the newest; held: also in RAM
        (False: on flash only, until took()). False if the filesystem refused it (full,
        or failing): the message then lives in RAM only."""
        seq = self._next
        self._next = seq + 1
        if held:
            self._loaded = seq + 1
        size = _HEAD + 2
        for x in fields:
            size += 2 + len(x)
        if self._cur_bytes and self._cur_bytes + size > _SEG_BYTES:
            self._cur += 1  # a new segment: the old one is removed once its messages left
            self._cur_bytes = 0
            self._cur_last = -1
            self._trim()
        if self._cur_last < 0:
            self._nsegs += 1  # its file is made by this append
        self._cur_last = seq
        if self._first == self._cur:
            self._first_last = seq
        h = self._hdr
        struct.pack_into("<HIIB", h, 0, size - 4, seq, self._done & 0xFFFFFFFF, len(fields))
        try:
            with open(self._path(self._cur), "ab") as f:
                f.write(h)
                crc = crc16(h)
                for x in fields:
                    struct.pack_into("<H", h, 0, len(x))
                    f.write(memoryview(h)[0:2])
                    crc = crc16(memoryview(h)[0:2], crc)
                    f.write(x)
                    crc = crc16(x, crc)
                struct.pack_into(">H", h, 0, crc)
                f.write(memoryview(h)[0:2])
        except OSError:
            self._cur_bytes = _SEG_BYTES  # whatever reached the file: appended to no more
            return False
        self._cur_bytes += size
        return True

    def spilled(self):
        """(seq, fields) of each record on flash only, oldest first (a generator: the
        outbox takes what its RAM holds, calling took(seq) for each)."""
        num = max(self._load_num, self._first)
        while num <= self._cur:
            for r in _records(self._seg(num) or b""):
                if r[1] >= self._loaded:
                    self._load_num = num
                    yield r[1], r[3]
            num += 1

    def took(self, seq):
        """The record seq is in RAM now."""
        self._loaded = seq + 1

    def this_boot(self, seq):
        return seq >= self._boot

    def size(self):
        """The log's bytes on flash (its segments', counted whole)."""
        return self._nsegs * _SEG_BYTES

    def done(self):
        """The oldest message in the outbox left it (acked, dropped or given up)."""
        held = self._held
        if not held:
            self._done += 1
        elif held[0] == held[1]:
            self._done = held.pop(0)
            held.pop(0)
        else:
            self._done = held[0]
            held[0] += 1
        self._trim()

    def _trim(self):
        # remove the oldest segments once every message in them has left
        while self._first != self._cur and self._first_last <= self._done:
            try:
                os.remove(self._path(self._first))
                self._nsegs -= 1
            except OSError:
                pass  # gone already, or the filesystem failing: replay skips it as done
            self._first += 1
            if self._first == self._cur:
                self._first_last = self._cur_last
            else:
                self._first_last = self._last_in(self._first)

    def _last_in(self, num):
        # the last seq in segment num (-1: none, or no such segment)
        last = -1
        for r in _records(self._seg(num) or b""):
            last = r[1]
        return last

    def _path(self, num):
        return "%s/%d" % (self._dir, num)


def _numbers(d):
    # the lowest and the highest segment number in directory d (-1, -1: none); no list of
    # them, nor of the directory's names where the port can iterate it (os.ilistdir): a
    # long outage's log is many segments
    lo = -1
    hi = -1
    try:
        names = os.ilistdir(d)
    except AttributeError:  # CPython
        names = os.listdir(d)
    for entry in names:
        n = entry[0] if isinstance(entry, tuple) else entry
        if n.isdigit():
            v = int(n)
            if lo < 0 or v < lo:
                lo = v
            hi = max(hi, v)
    return lo, hi


def _records(buf):
    # (next pos, seq, done, fields) of each valid record of a segment, up to the first
    # that is not (the end, or a torn tail: what follows it is not trusted)
    pos = 0
    while True:
        r = _record(buf, pos)
        if r is None:
            return
        yield r
        pos = r[0]


def _record(buf, pos):
    """(next pos, seq, done, fields) of the record at pos, or None at the end of the valid
    records (end of buf, a record cut short, a bad CRC)."""
    if pos + 2 > len(buf):
        return None
    n = buf[pos] | buf[pos + 1] << 8
    end = pos + 2 + n
    if n < _MIN or end + 2 > len(buf):
        return None
    if crc16(memoryview(buf)[pos:end]) != (buf[end] << 8 | buf[end + 1]):
        return None
    seq, done, k = struct.unpack_from("<IIB", buf, pos + 2)
    fields = []
    p = pos + _HEAD
    for _ in range(k):
        if p + 2 > end:
            return None
        ln = buf[p] | buf[p + 1] << 8
        p += 2
        if p + ln > end:
            return None
        fields.append(buf[p : p + ln])
        p += ln
    if done == 0xFFFFFFFF:
        done = -1
    return end + 2, seq, done, fields
