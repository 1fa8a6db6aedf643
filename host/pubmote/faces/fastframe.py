"""The link framing (pubmote_wire.framing: CRC-16 then COBS, 0x00-delimited) on the
bridge's hot path, in fewer Python steps: a board face frames and deframes one packet per
board message, and the codec's general functions (preallocated buffers, a board's idioms)
cost a CPython bridge microseconds each way per packet (bench/gateway/hotpath.py).

Same bytes as the codec, proven by tests/host/faces/test_fastframe.py: `encode` hands any
payload with a 254-byte run without zeros to framing.encode; `Deframer` decodes whole
frames itself and gives the codec's FrameDecoder everything else (a frame split across
reads, anything malformed), so what is counted, and how, stays the codec's."""

from __future__ import annotations

from binascii import crc_hqx

from pubmote_wire import framing

_CODE = [bytes((k + 1,)) for k in range(254)]  # a COBS block's code byte by its length


def encode(payload: bytes | bytearray | memoryview) -> bytes:
    """framing.encode(payload): 00 | COBS(payload | CRC-16) | 00."""
    data = bytes(payload)
    parts = (data + crc_hqx(data, 0xFFFF).to_bytes(2, "big")).split(b"\x00")
    out = [b"\x00"]
    for part in parts:
        if len(part) >= 254:
            return bytes(framing.encode(data))  # full blocks: the codec's canonical rules
        out.append(_CODE[len(part)])
        out.append(part)
    out.append(b"\x00")
    return b"".join(out)


class Deframer:
    """framing.FrameDecoder's results and counters, whole frames decoded here."""

    def __init__(self, max_frame: int) -> None:
        self.codec = framing.FrameDecoder(max_frame)
        self.cap = max_frame + 2  # payload and CRC
        self.raw_cap = framing.frame_size_max(max_frame)
        self.fast_ok = 0
        self.open = False  # the codec holds the start of a frame (the last bytes it got)

    @property
    def frames_bad_crc(self) -> int:
        return int(self.codec.frames_bad_crc)

    @property
    def frames_bad_cobs(self) -> int:
        return int(self.codec.frames_bad_cobs)

    @property
    def frames_oversize(self) -> int:
        return int(self.codec.frames_oversize)

    @property
    def frames_ok(self) -> int:
        return int(self.codec.frames_ok) + self.fast_ok

    def feed(self, chunk: bytes) -> list[bytes]:
        """The good payloads completed by chunk, in order."""
        data = bytes(chunk)
        out: list[bytes] = []
        start = 0
        if self.open:  # the frame the codec holds ends at the first delimiter
            z = data.find(b"\x00")
            if z < 0:
                return list(self.codec.feed(data))
            out.extend(self.codec.feed(data[: z + 1]))
            self.open = False
            start = z + 1
        end = data.rfind(b"\x00")
        if end >= start:
            for piece in data[start:end].split(b"\x00"):
                if piece:
                    pkt = self._unframe(piece)
                    if pkt is None:  # malformed: the codec decides how, and counts it
                        out.extend(self.codec.feed(b"\x00" + piece + b"\x00"))
                    else:
                        self.fast_ok += 1
                        out.append(pkt)
            start = end + 1
        if start < len(data):  # a frame not finished yet: the codec keeps it
            out.extend(self.codec.feed(data[start:]))
            self.open = True
        return out

    def _unframe(self, piece: bytes) -> bytes | None:
        """One frame's payload, or None if it is not a good frame."""
        n = len(piece)
        if n > self.raw_cap:
            return None
        blocks = []
        full = False  # a 254-byte block (code FF): no zero after it
        i = 0
        while i < n:
            code = piece[i]
            j = i + code
            if j > n:
                return None  # a block cut short
            blocks.append(piece[i + 1 : j])
            full = full or code == 0xFF
            i = j
        if not full:  # the usual frame: a zero after every block but the last
            raw = b"\x00".join(blocks)
        else:
            out = []
            i = 0
            for blk in blocks:
                out.append(blk)
                i += len(blk) + 1
                if len(blk) < 254 and i < n:
                    out.append(b"\x00")
            raw = b"".join(out)
        k = len(raw)
        if k < 2 or k > self.cap or crc_hqx(raw[: k - 2], 0xFFFF) != int.from_bytes(
                raw[k - 2 :], "big"):
            return None
        return raw[: k - 2]
