# Types of pubmote_wire.signature for the host's type checks.
DIGEST_SHA256: int
HMAC_SHA256: int

class _Signer:
    sig_type: int
    sig_len: int

class DigestSigner(_Signer):
    def __init__(self) -> None: ...
