# Link framing for serial lines (UART, USB CDC): CRC-16/CCITT-FALSE then COBS, 0x00-delimited.
# On the wire a frame is 00 | COBS(payload | crc16 big-endian) | 00. The leading 00 ends any
# garbage the receiver holds (a reset board, line noise), so each frame resynchronises it;
# an empty frame (two 00s in a row) is not an error and is skipped silently.
from .compat import const
from .errors import EncodeError

MAX_FRAME = const(1024)  # default largest payload, bytes (CRC and COBS overhead not included)


try:
    from binascii import crc_hqx as _crc_hqx  # CPython: the same CRC, in C
except ImportError:  # MicroPython has no crc_hqx
    _crc_hqx = None
# CPython decodes whole COBS blocks with bytes operations (C loops); a board goes byte by
# byte into its one preallocated buffer. Both paths count the same (tests/host checks).
_BLOCKWISE = _crc_hqx is not None


def crc16(data, crc=0xFFFF):
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, xorout 0).
    Table-free: a few shifts per byte, no 512-byte table on the board's heap."""
    if _crc_hqx is not None:
        return _crc_hqx(data, crc)
    for b in data:
        x = ((crc >> 8) ^ b) & 0xFF
        x ^= x >> 4
        crc = ((crc << 8) ^ (x << 12) ^ (x << 5) ^ x) & 0xFFFF
    return crc


def frame_size_max(n):
    """Largest encoded frame, delimiters included, for an n-byte payload."""
    body = n + 2
    return body + body // 254 + 1 + 2


def encode_frame(buf, off, payload, bytewise=False):
    """Write 00 | COBS(payload | crc) | 00 at buf[off]; return the bytes written."""
    n = len(payload)
    if off + frame_size_max(n) > len(buf):
        raise EncodeError("buffer too small for frame")
    crc = crc16(payload)
    if _BLOCKWISE and not bytewise:
        return _encode_blocks(buf, off, payload, crc)
    if off:
        buf = memoryview(buf)[off:]
    # buf holds frame_size_max(n) bytes: the blocks go in one pass of the part encoder
    return _encode_part(buf, payload, crc, 0)[0]


FRAME_PART_MIN = const(258)  # a buffer for encode_frame_part: 00, one whole block (255), 00, spare


def encode_frame_part(buf, payload, crc, pos):
    """encode_frame a few whole COBS blocks at a time, for a buffer smaller than the frame
    (at least FRAME_PART_MIN bytes). crc is crc16(payload); pos is 0 for the first call
    (which writes the leading 00), then what the last call returned. Returns (bytes
    written to buf[0:], next pos); next pos is -1 once the closing 00 is written. The parts
    in order are exactly encode_frame's bytes."""
    if len(buf) < FRAME_PART_MIN:
        raise EncodeError("buffer too small for a frame part")
    return _encode_part(buf, payload, crc, pos)


def _encode_part(buf, payload, crc, pos):
    # COBS by hand, byte by byte (encode_frame_part's contract, any buffer size): a block
    # is written only while it fits whole with the closing 00
    cap = len(buf)
    n = len(payload)
    total = n + 2
    i = pos >> 1
    force = pos & 1  # the last block ended at a zero: a block opens even with no input left
    p = 0
    if pos == 0:
        buf[0] = 0
        p = 1
        force = 1
    # room for the next block whole (its code, up to 254 bytes) and the closing 00
    while (i < total or force) and p + 2 + min(254, total - i) <= cap:
        code_at = p
        p += 1
        code = 1
        force = 0
        while i < total:
            if i < n:
                b = payload[i]
            elif i == n:
                b = crc >> 8
            else:
                b = crc & 0xFF
            i += 1
            if b == 0:
                force = 1
                break
            buf[p] = b
            p += 1
            code += 1
            if code == 0xFF:
                break  # a full block: the next opens only if more input comes
        buf[code_at] = code
    if i >= total and not force:
        buf[p] = 0
        return p + 1, -1
    return p, i * 2 + force


def _encode_blocks(buf, off, payload, crc):
    # CPython: the same bytes as _encode_part, a block at a time
    data = bytes(payload) + bytes((crc >> 8, crc & 0xFF))
    buf[off] = 0
    p = off + 1
    parts = data.split(b"\x00")
    last = len(parts) - 1
    for k in range(len(parts)):
        part = parts[k]
        i = 0
        # full 254-byte blocks (code FF, no implied zero); an exact multiple that ends
        # the data opens no empty block after it
        while len(part) - i >= 254 and not (k == last and len(part) - i == 254):
            buf[p] = 0xFF
            buf[p + 1 : p + 255] = part[i : i + 254]
            p += 255
            i += 254
        rest = len(part) - i
        if rest == 254:
            buf[p] = 0xFF
        else:
            buf[p] = rest + 1
        buf[p + 1 : p + 1 + rest] = part[i:]
        p += 1 + rest
    buf[p] = 0
    return p + 1 - off


def encode(payload):
    """Convenience: the framed payload as new bytes."""
    buf = bytearray(frame_size_max(len(payload)))
    n = encode_frame(buf, 0, payload)
    return bytes(buf[:n])


class FrameDecoder:
    """Incremental decoder: feed() any chunks, get back complete payloads.

    Never raises on bad input: the decoded frame lives in one preallocated bytearray of
    max_frame + 2 bytes. With start (a board's byte-by-byte decoder only), it holds
    start + 2 bytes at first and grows to max_frame + 2 once, for good, at the first
    frame that needs it: a board that only receives small frames keeps a small buffer.
    Bad frames are dropped and counted:
    frames_bad_crc (also frames too short to hold a CRC), frames_bad_cobs (a block cut
    short by a delimiter), frames_oversize (longer than max_frame; skipped to the next
    delimiter). bytes_discarded counts every non-delimiter byte of dropped frames. buf is
    the frame buffer (read its size; a payload handed out is a view of it)."""

    def __init__(self, max_frame=MAX_FRAME, bytewise=False, start=0):
        self.max_frame = max_frame
        self._blockwise = _BLOCKWISE and not bytewise
        if self._blockwise or not 0 < start < max_frame:
            start = max_frame
        self.buf = bytearray(start + 2)
        self._mv = memoryview(self.buf)
        if self._blockwise:  # only there: each attribute costs a board's heap
            self._pend = bytearray()  # the encoded bytes of the frame so far
            self._pend_raw = 0
            self._pend_skip = False  # oversize already, counted
            self._raw_cap = (max_frame + 2) + (max_frame + 2) // 254 + 2
        self.frames_ok = 0
        self.frames_bad_crc = 0
        self.frames_bad_cobs = 0
        self.frames_oversize = 0
        self.bytes_discarded = 0
        self._reset()

    def _reset(self):
        self._len = 0  # decoded bytes so far
        self._left = 0  # data bytes left in the current block; 0 = next byte is a code
        self._zero = False  # the current block ends with an implied zero
        self._raw = 0  # encoded bytes seen in this frame
        self._skip = False  # oversize: discard to the next delimiter

    def stats(self):
        return {
            "frames_ok": self.frames_ok,
            "frames_bad_crc": self.frames_bad_crc,
            "frames_bad_cobs": self.frames_bad_cobs,
            "frames_oversize": self.frames_oversize,
            "bytes_discarded": self.bytes_discarded,
        }

    def _end(self):
        # A delimiter: returns the decoded length of a good frame, or -1.
        raw = self._raw
        if raw == 0:
            return -1  # empty frame between two delimiters: resync filler, not an error
        n = self._len
        skip = self._skip
        left = self._left
        self._reset()
        if skip:
            self.bytes_discarded += raw
            return -1
        if left:
            self.frames_bad_cobs += 1
            self.bytes_discarded += raw
            return -1
        buf = self.buf
        if n < 2 or crc16(self._mv[: n - 2]) != (buf[n - 2] << 8) | buf[n - 1]:
            self.frames_bad_crc += 1
            self.bytes_discarded += raw
            return -1
        self.frames_ok += 1
        return n - 2

    def feed_cb(self, chunk, cb):
        """Feed bytes; call cb(memoryview) for each good payload. The view is only valid
        during the call (the buffer is reused): copy it to keep it. Returns the count."""
        if self._blockwise:
            return self._feed_blocks(chunk, cb)
        count = 0
        buf = self.buf
        cap = len(buf)
        for b in chunk:
            if b == 0:
                n = self._end()
                if n >= 0:
                    count += 1
                    cb(self._mv[:n])
                continue
            self._raw += 1
            if self._skip:
                continue
            if self._left == 0:
                # A code byte: the previous block's implied zero becomes real now that
                # we know another block follows.
                if self._zero:
                    if self._len >= cap:
                        if not self._grow():
                            self._oversize()
                            continue
                        buf = self.buf
                        cap = len(buf)
                    buf[self._len] = 0
                    self._len += 1
                self._left = b - 1
                self._zero = b != 0xFF
            else:
                if self._len >= cap:
                    if not self._grow():
                        self._oversize()
                        continue
                    buf = self.buf
                    cap = len(buf)
                buf[self._len] = b
                self._len += 1
                self._left -= 1
        return count

    def _grow(self):
        # the buffer is full: grow it to max_frame + 2, keeping the bytes so far; False
        # if it has that size already (the frame is oversize)
        full = self.max_frame + 2
        n = len(self.buf)
        if n >= full:
            return False
        buf = bytearray(full)
        buf[0:n] = self.buf
        self.buf = buf
        self._mv = memoryview(buf)
        return True

    def _oversize(self):
        self._skip = True
        self.frames_oversize += 1

    def _feed_blocks(self, chunk, cb):
        count = 0
        pieces = bytes(chunk).split(b"\x00")
        last = len(pieces) - 1
        for k in range(len(pieces)):
            piece = pieces[k]
            self._pend_raw += len(piece)
            if not self._pend_skip:
                self._pend += piece
            if k == last:
                # a frame still open: counted as soon as it is too big, as byte by byte
                # does (-2 only means cut short so far)
                if not self._pend_skip and (len(self._pend) > self._raw_cap
                                            or self._unblock(self._pend) == -1):
                    self._pend_skip = True
                    self.frames_oversize += 1
                    self._pend = bytearray()
                break
            n = self._end_blocks()  # a delimiter followed this piece
            if n >= 0:
                count += 1
                cb(self._mv[:n])
        return count

    def _end_blocks(self):
        raw, r, skip = self._pend_raw, self._pend, self._pend_skip
        self._pend = bytearray()
        self._pend_raw = 0
        self._pend_skip = False
        if raw == 0:
            return -1
        if skip:
            status = -3  # counted when it grew too big
        elif len(r) > self._raw_cap:
            status = -1
        else:
            status = self._unblock(r)
        if status == -1:
            self.frames_oversize += 1
        elif status == -2:
            self.frames_bad_cobs += 1
        if status < 0:
            self.bytes_discarded += raw
            return -1
        return self._check(status, raw)

    def _unblock(self, r):
        # COBS-decode r into self.buf: its length, -1 oversize or -2 a block cut short
        buf = self.buf
        cap = len(buf)
        n = len(r)
        i = out = 0
        zero = False
        while i < n:
            code = r[i]
            i += 1
            if zero:
                if out >= cap:
                    return -1
                buf[out] = 0
                out += 1
            blk = r[i : i + code - 1]
            if out + len(blk) > cap:
                return -1
            buf[out : out + len(blk)] = blk
            out += len(blk)
            i += len(blk)
            if len(blk) < code - 1:
                return -2
            zero = code != 0xFF
        return out

    def _check(self, n, raw):
        # a good frame's payload length, or -1 (CRC wrong or no room for one; counted)
        buf = self.buf
        if n < 2 or crc16(self._mv[: n - 2]) != (buf[n - 2] << 8) | buf[n - 1]:
            self.frames_bad_crc += 1
            self.bytes_discarded += raw
            return -1
        self.frames_ok += 1
        return n - 2

    def feed(self, chunk):
        """Feed bytes; return a list of the complete good payloads (as bytes)."""
        out = []
        self.feed_cb(chunk, lambda mv: out.append(bytes(mv)))
        return out
