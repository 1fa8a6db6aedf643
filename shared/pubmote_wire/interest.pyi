# Types of pubmote_wire.interest for the host's type checks.
from pubmote_wire._types import Buf, WBuf
from pubmote_wire.signature import Signer

INTEREST: int

class Interest:
    name: memoryview
    forwarding_hint: memoryview | None
    nonce: int | None
    lifetime_ms: int | None
    hop_limit: int | None
    app_params: memoryview | None
    sig_type: int | None
    sig_key_name: memoryview | None
    sig_nonce: memoryview | None
    sig_time_ms: int | None
    sig_seq: int | None
    sig_value: memoryview | None
    can_be_prefix: bool
    must_be_fresh: bool
    params_digest_ok: bool
    name_start: int
    name_end: int
    digest_at: int
    params_at: int
    signed_end: int
    def __init__(self) -> None: ...
    @property
    def signed_regions(self) -> list[tuple[int, int]] | None: ...

def encode_interest(buf: WBuf | None, off: int, name: Buf, *, can_be_prefix: bool = ...,
                    must_be_fresh: bool = ..., forwarding_hint: list[Buf] | None = ...,
                    nonce: int | None = ..., lifetime_ms: int | None = ...,
                    hop_limit: int | None = ..., app_params: Buf | None = ...,
                    signer: Signer | None = ..., sig_nonce: Buf | None = ...,
                    sig_time_ms: int | None = ..., sig_seq: int | None = ...) -> int: ...
def encode(name: Buf | str, *, can_be_prefix: bool = ..., must_be_fresh: bool = ...,
           forwarding_hint: list[Buf] | None = ..., nonce: int | None = ...,
           lifetime_ms: int | None = ..., hop_limit: int | None = ...,
           app_params: Buf | None = ..., signer: Signer | None = ...,
           sig_nonce: Buf | None = ..., sig_time_ms: int | None = ...,
           sig_seq: int | None = ...) -> bytes: ...
def decode_interest(buf: Buf, into: Interest | None = None) -> Interest: ...
def verify_interest(interest: Interest, buf: Buf, key: Buf | None = None) -> bool: ...
