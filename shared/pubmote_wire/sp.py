# nanomsg/nng scalability protocols over TCP (SP-TCP): the 8-byte header and u64-length
# messages. (The NN_SUB prefix filter every pubmote subscription uses is subfilter.py.)
# Header: 00 'S' 'P' 00 | protocol u16 BE | 00 00. Message: u64 BE length | body.
# Described, with example bytes and the filter rule: docs/protocols/filters.md.
from struct import pack, pack_into

from .compat import const
from .errors import DecodeError, EncodeError


class NeedMore(Exception):
    """The incremental decoders here raise this when the bytes so far are a valid but
    incomplete prefix; feed more and try again. Not a DecodeError."""


PAIR = const(0x10)
PUB = const(0x20)
SUB = const(0x21)
REQ = const(0x30)
REP = const(0x31)

HEADER_SIZE = const(8)
_LEN_SIZE = const(8)
MAX_MSG = const(65536)

_PEERS = {PAIR: PAIR, PUB: SUB, SUB: PUB, REQ: REP, REP: REQ}


def peer_of(proto):
    """The protocol a socket of `proto` talks to (PUB <-> SUB, REQ <-> REP, PAIR)."""
    try:
        return _PEERS[proto]
    except KeyError:
        raise ValueError("unknown SP protocol") from None


def header(proto):
    """The 8-byte header a socket of `proto` sends first."""
    return bytes((0, 0x53, 0x50, 0, proto >> 8, proto & 0xFF, 0, 0))


def check_header(data8, expected_peer_proto=None):
    """Validate a received header; return the peer's protocol number. DecodeError on a
    bad magic, version or reserved bytes, or a peer other than expected_peer_proto."""
    if len(data8) != HEADER_SIZE:
        raise DecodeError("SP header is 8 bytes")
    if data8[0] != 0 or data8[1] != 0x53 or data8[2] != 0x50:
        raise DecodeError("bad SP magic")
    if data8[3] != 0:
        raise DecodeError("bad SP version")
    if data8[6] != 0 or data8[7] != 0:
        raise DecodeError("bad SP reserved bytes")
    proto = (data8[4] << 8) | data8[5]
    if expected_peer_proto is not None and proto != expected_peer_proto:
        raise DecodeError("unexpected SP peer protocol %d" % proto)
    return proto


def msg_size(n):
    return _LEN_SIZE + n


def write_msg(buf, off, body):
    """Write u64 BE length + body at buf[off]; return the bytes written."""
    n = len(body)
    if off + _LEN_SIZE + n > len(buf):
        raise EncodeError("buffer too small for SP message")
    # the u64 as two u32 halves: one C call, and no long integers on a board
    pack_into(">II", buf, off, n >> 32, n & 0xFFFFFFFF)
    buf[off + _LEN_SIZE : off + _LEN_SIZE + n] = body
    return _LEN_SIZE + n


def encode_msg(body):
    """u64 BE length + body, as new bytes (what the bridge sends each SP subscriber)."""
    n = len(body)
    return pack(">II", n >> 32, n & 0xFFFFFFFF) + bytes(body)


def _read_len(buf, off):
    n = 0
    for i in range(off, off + _LEN_SIZE):
        n = (n << 8) | buf[i]
    return n


def decode_msg(buf, off=0, max_msg=MAX_MSG):
    """Read one message at buf[off]: return (body memoryview, size). NeedMore if the
    bytes so far are a valid prefix; DecodeError if the length exceeds max_msg."""
    if len(buf) - off < _LEN_SIZE:
        raise NeedMore()
    n = _read_len(buf, off)
    if n > max_msg:
        raise DecodeError("SP message longer than max_msg")
    if len(buf) - off - _LEN_SIZE < n:
        raise NeedMore()
    start = off + _LEN_SIZE
    return memoryview(buf)[start : start + n], _LEN_SIZE + n


class MsgDecoder:
    """Stream reassembly of SP messages from arbitrary chunks.

    With expect_header=P (the protocol number the peer must announce, e.g. PUB for a
    SUB socket) the 8-byte header is read and checked first; peer_proto holds it then.
    A declared length above max_msg raises DecodeError at once, before any body byte
    is stored; the body buffer grows only with bytes actually received. After a
    DecodeError the stream is unusable (close the connection): feed() raises again."""

    def __init__(self, max_msg=MAX_MSG, expect_header=None):
        self.max_msg = max_msg
        self.expect_header = expect_header
        self.peer_proto = None
        self.failed = False
        self._small = bytearray(8)  # the header or the length being collected
        self._have = 0
        self._state = 0 if expect_header is not None else 1  # 0 header, 1 length, 2 body
        self._need = 0
        self._body = None

    def _fail(self, msg):
        self.failed = True
        raise DecodeError(msg)

    def feed(self, chunk):
        """Feed bytes; return a list of the complete message bodies (bytes)."""
        if self.failed:
            raise DecodeError("SP stream already failed")
        out = []
        mv = memoryview(chunk)
        pos = 0
        end = len(mv)
        while pos < end:
            if self._state == 2:
                take = self._need - len(self._body)
                if take > end - pos:
                    take = end - pos
                self._body.extend(mv[pos : pos + take])
                pos += take
                if len(self._body) == self._need:
                    out.append(bytes(self._body))
                    self._body = None
                    self._state = 1
                continue
            take = 8 - self._have
            if take > end - pos:
                take = end - pos
            self._small[self._have : self._have + take] = mv[pos : pos + take]
            self._have += take
            pos += take
            if self._have < 8:
                break
            self._have = 0
            if self._state == 0:
                try:
                    self.peer_proto = check_header(self._small, self.expect_header)
                except DecodeError:
                    self.failed = True
                    raise
                self._state = 1
                continue
            n = _read_len(self._small, 0)
            if n > self.max_msg:
                self._fail("SP message longer than max_msg")
            if n == 0:
                out.append(b"")
                continue
            self._need = n
            self._body = bytearray()
            self._state = 2
        return out
