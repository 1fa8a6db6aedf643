# Types of pubmote_wire.notify (NDN notify pub/sub) for the host's type checks.
from pubmote_wire._types import Buf, WBuf
from pubmote_wire.interest import Interest
from pubmote_wire.signature import DigestSigner, Signer

DEFAULT_LIFETIME_MS: int
NOTIFY: bytes
MSG: bytes
DIGEST: DigestSigner

def msg_name(publisher: Buf, topic: Buf, nonce: Buf) -> bytes: ...
def encode_notify_interest(buf: WBuf | None, off: int, topic: Buf, publisher: Buf, nonce: Buf,
                           *, fwd_hint: Buf | None = ..., interest_nonce: int | None = ...,
                           lifetime_ms: int = ..., signer: Signer | None = ...,
                           sig_nonce: Buf | None = ..., sig_time_ms: int | None = ...,
                           inline: Buf | None = ...) -> int: ...
def encode_msg_interest(buf: WBuf | None, off: int, publisher: Buf, topic: Buf, nonce: Buf, *,
                        interest_nonce: int | None = ..., lifetime_ms: int = ...,
                        fwd_hint: Buf | None = ...) -> int: ...
def encode_msg_data(buf: WBuf | None, off: int, publisher: Buf, topic: Buf, nonce: Buf,
                    content: Buf, *, signer: Signer | None = ...) -> int: ...
def encode_ack_data(buf: WBuf | None, off: int, notify_interest_full_name: Buf, *,
                    signer: Signer | None = ...) -> int: ...
def inline_msg(i: Interest) -> memoryview | None: ...
def parse_notify_interest(buf: Buf, into: Interest | None = None) -> tuple[
    memoryview, memoryview, memoryview, memoryview | None, Interest]: ...
def notify_parts(i: Interest, buf: Buf) -> tuple[memoryview, memoryview, memoryview,
                                                  memoryview | None, Interest]: ...
