# Types of pubmote_wire.hmac256 for the host's type checks.
from pubmote_wire._types import Buf
from pubmote_wire.signature import Signer

def hmac_sha256(key: Buf, *chunks: Buf) -> bytes: ...

class HmacSigner(Signer):
    def __init__(self, key: Buf, key_name: Buf | None = None) -> None: ...
