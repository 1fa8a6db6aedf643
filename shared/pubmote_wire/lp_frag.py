# NDNLPv2 indexed fragmentation and the bounded Reassembler, for links with a small MTU.
# Apart from lp.py so a board that never fragments does not load (or compile) it.
from .compat import const
from .errors import DecodeError, EncodeError
from .lp import LP_PACKET, LpPacket, decode_lp, encode_lp
from .tlv import nonneg_tlv_size, tl_size, varnum_size

_FRAGMENT = const(0x50)
_FRAG_INDEX = const(0x52)
_FRAG_COUNT = const(0x53)
_SEQ_FIELD = const(10)  # a Sequence element: T (1 octet), L=8, 8 octets


def _frag_overhead(count, mtu):
    # Worst case for any fragment of `count`: the largest FragIndex/FragCount, a Sequence,
    # and Fragment/LpPacket lengths as wide as the MTU itself needs.
    w = varnum_size(mtu)
    return (1 + w + _SEQ_FIELD + nonneg_tlv_size(_FRAG_INDEX, count - 1)
            + nonneg_tlv_size(_FRAG_COUNT, count) + 1 + w)


def fragment_plan(packet_len, mtu):
    """(count, chunk) for splitting a packet_len-byte network packet into LpPackets of at
    most mtu bytes: count fragments carrying chunk bytes each (the last maybe fewer).
    count 1 means a single LpPacket with Sequence and Fragment only."""
    if packet_len < 1:
        raise EncodeError("empty packet")
    single = tl_size(LP_PACKET, _SEQ_FIELD + tl_size(_FRAGMENT, packet_len))
    if single <= mtu:
        return 1, packet_len
    count = 2
    while True:
        chunk = mtu - _frag_overhead(count, mtu)
        if chunk < 1:
            raise EncodeError("MTU too small for fragmentation")
        need = (packet_len + chunk - 1) // chunk
        if need <= count:
            return need, chunk
        count = need


def encode_fragment(buf, off, packet, mtu, sequence_base, index):
    """Write fragment `index` of packet (per fragment_plan) at buf[off]; return its size."""
    count, chunk = fragment_plan(len(packet), mtu)
    if index < 0 or index >= count:
        raise EncodeError("fragment index out of range")
    start = index * chunk
    end = start + chunk
    if end > len(packet):
        end = len(packet)
    part = memoryview(packet)[start:end]
    seq = (sequence_base + index) & 0xFFFFFFFFFFFFFFFF
    if count == 1:
        return encode_lp(buf, off, part, sequence=seq)
    return encode_lp(buf, off, part, sequence=seq, frag_index=index, frag_count=count)


def fragment(packet, mtu, sequence_base):
    """Split a network packet into a list of LpPacket bytes, each at most mtu bytes, with
    Sequence = sequence_base + FragIndex (NDNLPv2 indexed fragmentation)."""
    count, _ = fragment_plan(len(packet), mtu)
    buf = bytearray(mtu)
    out = []
    for i in range(count):
        n = encode_fragment(buf, 0, packet, mtu, sequence_base, i)
        out.append(bytes(buf[:n]))
    return out


_STATS = ("completed", "duplicates", "evictions", "timeouts", "malformed", "dropped")


class Reassembler:
    """Reassembles indexed fragments into network packets, within fixed bounds.

    feed(pkt, now_ms) takes an LpPacket (or its bytes) and returns the complete
    network packet when one is done, else None. An unfragmented LpPacket returns its
    fragment memoryview unchanged (copy it before reusing the input buffer); a
    reassembled packet is new bytes. At most max_partial packets and max_bytes fragment
    bytes are held: the oldest partial packet is evicted to make room (evictions).
    Partials older than timeout_ms are dropped (timeouts); now_ms must not wrap.
    A packet of more than max_fragments pieces or max_bytes bytes is dropped (dropped).
    Malformed fragments raise DecodeError (malformed)."""

    def __init__(self, max_partial=8, max_bytes=16384, timeout_ms=2000, max_fragments=64):
        self.max_partial = max_partial
        self.max_fragments = max_fragments
        self.max_bytes = max_bytes
        self.timeout_ms = timeout_ms
        # Each partial: [base, count, received, nbytes, start_ms, parts]; oldest first.
        # Bases are unique, so list.remove() finds exactly the one meant.
        self._partials = []
        self._bytes = 0
        for k in _STATS:
            setattr(self, k, 0)
        self._lp = LpPacket()

    def stats(self):
        d = {"partials": len(self._partials), "bytes": self._bytes}
        for k in _STATS:
            d[k] = getattr(self, k)
        return d

    def _drop(self, part):
        self._bytes -= part[3]
        self._partials.remove(part)

    def expire(self, now_ms):
        """Drop partial packets older than timeout_ms."""
        for part in list(self._partials):
            if now_ms - part[4] >= self.timeout_ms:
                self._drop(part)
                self.timeouts += 1

    def _bad(self, part=None):
        if part is not None:
            self._drop(part)
        self.malformed += 1
        raise DecodeError("malformed fragment")

    def feed(self, pkt, now_ms):
        if not isinstance(pkt, LpPacket):
            try:
                pkt = decode_lp(pkt, self._lp)
            except DecodeError:
                self._bad()
        self.expire(now_ms)
        frag = pkt.fragment
        if frag is None:
            return None  # IDLE packet (acks only)
        count = 1 if pkt.frag_count is None else pkt.frag_count
        index = pkt.frag_index or 0
        if count < 1 or index >= count:
            self._bad()
        if count == 1:
            return frag
        if pkt.sequence is None or len(frag) == 0:
            self._bad()
        return self._add((pkt.sequence - index) & 0xFFFFFFFFFFFFFFFF, index, count, frag, now_ms)

    def _add(self, base, index, count, frag, now_ms):
        part = None
        for p in self._partials:
            if p[0] == base:
                part = p
                if p[1] != count:
                    self._bad(p)
        n = len(frag)
        if count > self.max_fragments or n + (part[3] if part else 0) > self.max_bytes:
            # Valid, but more than we are willing to hold: this packet cannot complete.
            self.dropped += 1
            if part is not None:
                self._drop(part)
            return None
        if part is not None and part[5][index] is not None:
            self.duplicates += 1
            return None
        self._make_room(part, n)
        if part is None:
            if self.max_partial < 1:
                self.dropped += 1
                return None
            part = [base, count, 0, 0, now_ms, [None] * count]
            self._partials.append(part)
        part[5][index] = bytes(frag)
        part[2] += 1
        part[3] += n
        self._bytes += n
        if part[2] < count:
            return None
        self._drop(part)
        return self._join(part)

    def _make_room(self, part, n):
        # Evict the oldest partial packets (never the one being filled).
        parts = self._partials
        while parts and (self._bytes + n > self.max_bytes
                         or (part is None and len(parts) >= self.max_partial)):
            victim = parts[0] if parts[0] is not part else parts[1] if len(parts) > 1 else part
            if victim is part:
                return
            self._drop(victim)
            self.evictions += 1

    def _join(self, part):
        out = bytearray(part[3])
        p = 0
        for piece in part[5]:
            out[p : p + len(piece)] = piece
            p += len(piece)
        self.completed += 1
        return bytes(out)
