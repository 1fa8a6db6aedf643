# Types of pubmote_wire.data for the host's type checks.
from pubmote_wire._types import Buf, WBuf
from pubmote_wire.signature import Signer

DATA: int

BLOB: int

class Data:
    name: memoryview
    content_type: int | None
    freshness_ms: int | None
    final_block_id: memoryview | None
    content: memoryview | None
    sig_type: int | None
    sig_key_name: memoryview | None
    sig_nonce: memoryview | None
    sig_time_ms: int | None
    sig_seq: int | None
    sig_value: memoryview | None
    def __init__(self) -> None: ...
    @property
    def signed_regions(self) -> list[tuple[int, int]] | None: ...

def encode_data(buf: WBuf | None, off: int, name: Buf, content: Buf | None = None, *,
                content_type: int | None = ..., freshness_ms: int | None = ...,
                final_block_id: Buf | None = ..., signer: Signer | None = ...) -> int: ...
def encode(name: Buf, content: Buf | None = None, *, content_type: int | None = ...,
           freshness_ms: int | None = ..., final_block_id: Buf | None = ...,
           signer: Signer | None = ...) -> bytes: ...
def decode_data(buf: Buf, into: Data | None = None) -> Data: ...
def verify_data(d: Data, buf: Buf, key: Buf | None = None) -> bool: ...
