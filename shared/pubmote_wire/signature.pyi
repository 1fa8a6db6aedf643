# Types of pubmote_wire.signature for the host's type checks.
DIGEST_SHA256: int
HMAC_SHA256: int

class Signer:
    sig_type: int
    sig_len: int
    def __init__(self) -> None: ...

DigestSigner = Signer

DIGEST: DigestSigner
