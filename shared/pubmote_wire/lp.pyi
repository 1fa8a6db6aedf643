# Types of pubmote_wire.lp for the host's type checks.
from typing import Any

from pubmote_wire._types import Buf, WBuf

LP_PACKET: int
NACK_NONE: int
NACK_CONGESTION: int
NACK_DUPLICATE: int
NACK_NO_ROUTE: int

class LpPacket:
    fragment: memoryview | None
    nack_reason: int | None
    nack_has_reason: bool
    pit_token: memoryview | None
    acks: list[int]
    def __init__(self) -> None: ...
    def reset(self) -> None: ...

def is_lp(buf: Buf) -> bool: ...
def encode(fragment: Buf | None = None, **fields: Any) -> bytes: ...
def encode_nack(buf: WBuf | None, off: int, interest_bytes: Buf, reason: int) -> int: ...
def decode_lp(buf: Buf, into: LpPacket | None = None) -> LpPacket: ...
