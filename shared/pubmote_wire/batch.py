# Link batches: the board link's compact publish mode (docs/protocols/link-batch.md). Many
# small messages ride in one frame board -> bridge, and their acks in one frame back, so a
# serial line carries one write and one wake-up per batch instead of four NDN packets per
# message. Only the board<->bridge hop: the bridge relays each message as any other.
#
# BATCH frame: C0 | epoch u32 | records;  record: seq u32 | topic length u8 (0: the topic of
#   the record before it) | topic (Name TLV-VALUE: its components) | payload length u16 | payload
# ACKS frame:  C1 | epoch u32 | runs of acked seqs: first seq u32, count u16 ...
# Timed BATCH: C2 | epoch u32 | clock u64 | ticks u32 | records; record: seq u32 | ticks
#   u32 | then as above. clock: the board's time (ms since 1970) at the header's ticks, 0
#   when it has no synced clock; a record's ticks: when it was published (both on the
#   board's 2**30 ms counter), so it was taken at clock - (header ticks - record ticks)
#   (docs/protocols/event-time.md).
# Integers big-endian. epoch and seq stay below 2**30 (small ints on a 32-bit board).
from struct import pack_into

from . import framing
from .compat import const
from .errors import DecodeError, EncodeError

BATCH = const(0xC0)
ACKS = const(0xC1)
BATCH_T = const(0xC2)
HEADER = const(5)  # type and epoch
HEADER_T = const(17)  # type, epoch, clock and ticks
RECORD_OVERHEAD = const(7)  # seq, topic length, payload length
TICKS = const(4)  # a timed record's ticks
TOPIC_MAX = const(255)
SEQ_MASK = const(0x3FFFFFFF)


def _put32(buf, off, v):
    buf[off] = (v >> 24) & 0xFF
    buf[off + 1] = (v >> 16) & 0xFF
    buf[off + 2] = (v >> 8) & 0xFF
    buf[off + 3] = v & 0xFF


def _get32(buf, off):
    return (buf[off] << 24) | (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3]


def begin(buf, typ, epoch):
    """Start a BATCH, timed BATCH or ACKS frame in buf[0:] (a timed one with clock 0:
    set_clock fills it in); returns the offset after its header."""
    h = HEADER_T if typ == BATCH_T else HEADER
    if len(buf) < h:
        raise EncodeError("buffer too small for a batch header")
    if epoch < 0 or epoch > SEQ_MASK:
        raise EncodeError("epoch out of range")
    buf[0] = typ
    _put32(buf, 1, epoch)
    for i in range(HEADER, h):
        buf[i] = 0
    return h


def set_clock(buf, clock, ticks):
    """A timed BATCH's clock and ticks, as the frame is sent: clock the 8 bytes of the
    board's time at ticks (the firmware's clock.py), None when it has none (written as 0)."""
    if clock is None:
        for i in range(HEADER, HEADER + 8):
            buf[i] = 0
    else:
        buf[HEADER : HEADER + 8] = clock
    _put32(buf, HEADER + 8, ticks & SEQ_MASK)


def record_size(topic, payload, same_topic=False, timed=False):
    """Bytes one record takes (same_topic: it names the previous record's topic; timed:
    a timed BATCH's record, with its ticks)."""
    return (RECORD_OVERHEAD + (TICKS if timed else 0) + (0 if same_topic else len(topic))
            + len(payload))


def add_record(buf, off, seq, topic, payload, same_topic=False, ticks=None):
    """Write one record at buf[off] (ticks: a timed BATCH's, when it was published);
    returns the offset after it. EncodeError if it does not fit, or topic (1..255 bytes)
    or payload (< 65536) is out of range."""
    tn = 0 if same_topic else len(topic)
    if not same_topic and (tn == 0 or tn > TOPIC_MAX):
        raise EncodeError("topic must be 1..255 bytes")
    pn = len(payload)
    if pn > 0xFFFF:
        raise EncodeError("payload too large for a batch record")
    if seq < 0 or seq > SEQ_MASK:
        raise EncodeError("seq out of range")
    k = 0 if ticks is None else TICKS
    end = off + RECORD_OVERHEAD + k + tn + pn
    if end > len(buf):
        raise EncodeError("buffer too small for the record")
    if k:
        pack_into(">IIB", buf, off, seq, ticks & SEQ_MASK, tn)
    else:
        pack_into(">IB", buf, off, seq, tn)  # one C call: this runs once per message
    p = off + 5 + k
    if tn:
        buf[p : p + tn] = topic
        p += tn
    pack_into(">H", buf, p, pn)
    buf[p + 2 : end] = payload
    return end


def decode_batch(pkt):
    """(epoch, [(seq, topic, payload, taken), ...]) of a BATCH or timed BATCH frame, topic
    and payload as memoryview slices of pkt, taken the ms since 1970 the record was
    published at (None: a plain BATCH, or the board had no synced clock). The whole frame
    is checked before anything is returned: DecodeError if any record is malformed, so a
    torn batch is never half taken."""
    n = len(pkt)
    timed = n >= HEADER and pkt[0] == BATCH_T
    h = HEADER_T if timed else HEADER
    if n < h or (pkt[0] != BATCH and not timed):
        raise DecodeError("not a batch frame")
    mv = memoryview(pkt)
    epoch = _get32(pkt, 1)
    if epoch > SEQ_MASK:
        raise DecodeError("batch epoch out of range")
    clock, hticks = _header_clock(pkt) if timed else (None, 0)
    k = TICKS if timed else 0
    out = []
    topic = None
    p = h
    while p < n:
        if p + 5 + k > n:
            raise DecodeError("batch record cut short")
        seq = _get32(pkt, p)
        if seq > SEQ_MASK:
            raise DecodeError("batch seq out of range")
        taken = None
        if k:
            ticks = _get32(pkt, p + 4)
            if ticks > SEQ_MASK:
                raise DecodeError("batch ticks out of range")
            if clock is not None:
                taken = clock - ((hticks - ticks) & SEQ_MASK)
        tn = pkt[p + 4 + k]
        p += 5 + k
        if tn:
            if p + tn > n:
                raise DecodeError("batch topic cut short")
            topic = mv[p : p + tn]
            p += tn
        elif topic is None:
            raise DecodeError("first batch record names no topic")
        if p + 2 > n:
            raise DecodeError("batch record cut short")
        pn = (pkt[p] << 8) | pkt[p + 1]
        p += 2
        if p + pn > n:
            raise DecodeError("batch payload cut short")
        out.append((seq, topic, mv[p : p + pn], taken))
        p += pn
    if not out:
        raise DecodeError("empty batch")
    return epoch, out


def _header_clock(pkt):
    # a timed frame's clock (ms since 1970; None: the board had no synced clock) and the
    # board's ticks at that time
    clock = (_get32(pkt, HEADER) << 32) | _get32(pkt, HEADER + 4)
    hticks = _get32(pkt, HEADER + 8)
    if hticks > SEQ_MASK:
        raise DecodeError("batch ticks out of range")
    return (clock if clock else None), hticks


def add_acks(buf, off, seqs):
    """Append acked seqs (in the order the batch had them) at buf[off] of an ACKS frame, as
    runs of consecutive seqs (a batch's usual case: one run); returns the offset after."""
    k = 0
    n = len(seqs)
    while k < n:
        first = seqs[k]
        if first < 0 or first > SEQ_MASK:
            raise EncodeError("seq out of range")
        count = 1
        while k + count < n and count < 0xFFFF and seqs[k + count] == first + count:
            count += 1
        if off + 6 > len(buf):
            raise EncodeError("buffer too small for the acks")
        pack_into(">IH", buf, off, first, count)
        off += 6
        k += count
    return off


def ack_runs(pkt):
    """How many runs an ACKS frame holds; DecodeError if it is not a well-formed one."""
    n = len(pkt)
    if n < HEADER or pkt[0] != ACKS or (n - HEADER) % 6:
        raise DecodeError("not an acks frame")
    k = (n - HEADER) // 6
    for i in range(k):
        p = HEADER + 6 * i
        count = (pkt[p + 4] << 8) | pkt[p + 5]
        if count == 0 or _get32(pkt, p) + count - 1 > SEQ_MASK:
            raise DecodeError("bad ack run")
    return k


def epoch_of(pkt):
    """The epoch of a BATCH or ACKS frame (after ack_runs or decode_batch checked it)."""
    return _get32(pkt, 1)


def ack_run(pkt, i):
    """The i-th run of an ACKS frame: (first seq, count); the seqs first .. first+count-1."""
    p = HEADER + 6 * i
    return _get32(pkt, p), (pkt[p + 4] << 8) | pkt[p + 5]


def frame_inplace(buf, off, data, n):
    """framing.encode_frame for a payload held in data[0:n], a bytearray with two spare bytes after
    it (data[n:n+2] is overwritten with the CRC). Same bytes as encode_frame; on a board,
    several times faster for a payload with few zeros: find() locates each zero and a
    slice assignment copies each block, both in C, instead of a loop over every byte.
    (Here, not in framing: a board imports this module only once it uses batches, and each
    function in framing costs every board heap.)"""
    if n + 2 > len(data):
        raise EncodeError("no room for the CRC after the payload")
    if off + framing.frame_size_max(n) > len(buf):
        raise EncodeError("buffer too small for frame")
    crc = framing.crc16(memoryview(data)[0:n])
    data[n] = crc >> 8
    data[n + 1] = crc & 0xFF
    total = n + 2
    mv = memoryview(data)  # blocks copied from views: no bytes object per block
    buf[off] = 0
    p = off + 1
    i = 0
    while True:
        z = data.find(b"\x00", i, total)
        end = total if z < 0 else z
        # full 254-byte blocks (code FF, no implied zero); the data's last bytes, an exact
        # multiple of 254, open no empty block after them (the canonical form)
        while end - i >= 254 and not (z < 0 and end - i == 254):
            buf[p] = 0xFF
            buf[p + 1 : p + 255] = mv[i : i + 254]
            p += 255
            i += 254
        k = end - i
        buf[p] = 0xFF if k == 254 else k + 1
        buf[p + 1 : p + 1 + k] = mv[i:end]
        p += 1 + k
        if z < 0:
            break
        i = z + 1
    buf[p] = 0
    return p + 1 - off
