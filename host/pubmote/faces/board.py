"""Board faces: the bridge's end of a board's link; this module holds what serial.py,
stream.py and udp.py share (the framed link, face ids, bounds).

Byte streams carry the codec's link framing (COBS + CRC); a face turns frames into NDN
packets for the hub and back. Every outgoing buffer is bounded and counts what it drops.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from pubmote.faces import fastframe
from pubmote_wire import framing

log = logging.getLogger("pubmote.faces")

MAX_PACKET = 1024
MAX_FRAME = framing.frame_size_max(MAX_PACKET)
OUT_LIMIT_BYTES = 64 * 1024

_ids = itertools.count(1)


def next_face_id() -> int:
    """Face ids are unique across every kind of face (boards, NDN apps)."""
    return next(_ids)

PacketHandler = Callable[["BoardFace", bytes], None]
FaceHandler = Callable[["BoardFace"], None]


class BoardFace:
    """A framed byte link to one board. Subclasses provide _write_raw and lifetime."""

    kind = "?"

    def __init__(self, label: str, on_packet: PacketHandler, on_state: FaceHandler) -> None:
        self.face_id = next_face_id()
        self.label = label
        self.on_packet = on_packet
        self.on_state = on_state
        self.decoder = fastframe.Deframer(MAX_FRAME)
        self.up = False
        self.board: str | None = None  # set by the hub when the board registers
        self.tracer: Any = None  # set by the hub when --trace is on
        self.t_rx = 0.0  # time.time() of the last read
        self.t_seen = time.monotonic()  # of the last read (or the face's start): idleness
        self.counters = {"rx_frames": 0, "tx_frames": 0, "tx_dropped": 0, "rx_bytes": 0,
                         "tx_bytes": 0, "opens": 0, "rx_errors": 0}

    def send_packet(self, pkt: bytes) -> None:
        if not self.up:
            self.counters["tx_dropped"] += 1
            return
        if self.tracer is not None:
            self.tracer.record(self.label, "out", pkt)
        frame = fastframe.encode(pkt)
        if self._write_raw(frame):
            self.counters["tx_frames"] += 1
            self.counters["tx_bytes"] += len(frame)
        else:
            self.counters["tx_dropped"] += 1

    def _write_raw(self, frame: bytes) -> bool:
        raise NotImplementedError

    def feed(self, chunk: bytes) -> bool:
        """Deframe chunk and hand each packet on. False if that failed in the bridge's own
        code (counted in rx_errors, logged): whatever a board sends, the failure stays
        here, and a face with a connection closes it."""
        self.t_rx = time.time()  # when these bytes were read: a relayed message's t_recv
        self.t_seen = time.monotonic()
        self.counters["rx_bytes"] += len(chunk)
        try:
            pkts = self.decoder.feed(chunk)  # bytes each
            self.counters["rx_frames"] += len(pkts)
            for pkt in pkts:
                self.on_packet(self, pkt)
        except Exception:  # nothing a board sends may end the bridge
            self.counters["rx_errors"] += 1
            n = self.counters["rx_errors"]
            if n == 1 or n % 1000 == 0:
                log.exception("%s: reading failed (%d so far)", self.label, n)
            return False
        return True

    def bad_frames(self) -> int:
        d = self.decoder
        return int(d.frames_bad_crc + d.frames_bad_cobs + d.frames_oversize)

    def set_up(self, up: bool) -> None:
        """The link came up or went down: the hub hears of each change once."""
        if up != self.up:
            self.up = up
            self.on_state(self)

    async def run(self) -> None:
        """Keep the face up until cancelled (reconnecting where the link allows it)."""
        raise NotImplementedError

    def close(self) -> None:
        self.set_up(False)
