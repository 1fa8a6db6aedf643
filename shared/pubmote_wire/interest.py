# NDN Interest packets (v0.3): encode into a caller's buffer, decode into memoryview fields,
# ParametersSha256DigestComponent and signed Interests (DigestSha256 / HmacWithSha256).
# The codec itself is interest_core.py, which a board imports; here besides, what a board
# never calls: encode_interest, interest_size, encode and verify_interest.
from .errors import EncodeError
from .interest_core import INTEREST, Interest, decode_interest, encode_parts

__all__ = ["INTEREST", "Interest", "decode_interest", "encode", "encode_interest",
           "encode_parts", "interest_size", "verify_interest"]


# Write an Interest at buf[off]; return the bytes written (buf None: just count).
# name is a Name (bytes-like TLV-VALUE). With app_params or signer the
# ParametersSha256Digest component is computed and appended (one already in name is
# replaced). nonce=None leaves the Nonce out.
def encode_interest(buf, off, name, *, can_be_prefix=False, must_be_fresh=False,
                    forwarding_hint=None, nonce=None, lifetime_ms=None, hop_limit=None,
                    app_params=None, signer=None, sig_nonce=None, sig_time_ms=None,
                    sig_seq=None):
    if nonce is not None and nonce < 0:
        raise EncodeError("too large")
    return encode_parts(buf, off, name, can_be_prefix=can_be_prefix, must_be_fresh=must_be_fresh,
                        forwarding_hint=forwarding_hint, nonce=nonce, lifetime_ms=lifetime_ms,
                        hop_limit=hop_limit, app_params=app_params, signer=signer,
                        sig_nonce=sig_nonce, sig_time_ms=sig_time_ms, sig_seq=sig_seq)


# Bytes encode_interest will write for the same arguments.
def interest_size(name, **kw):
    return encode_interest(None, 0, name, **kw)


# Convenience: the Interest as bytes (name may also be a URI str here).
def encode(name, **kw):
    if isinstance(name, str):
        from .name import from_uri

        name = from_uri(name)
    buf = bytearray(encode_interest(None, 0, name, **kw))
    encode_interest(buf, 0, name, **kw)
    return bytes(buf)


# Check the signature of a decoded Interest against its input bytes.
def verify_interest(interest, buf, key=None):
    i = interest
    if i.signed_end < 0:
        return False
    from .verify import verify, verify2

    if i.digest_at + 34 != i.name_end:  # a digest inside the name (unusual): three regions
        return verify(i.sig_type, i.sig_value, buf, i.signed_regions, key)
    return verify2(i.sig_type, i.sig_value, buf, i.name_start, i.digest_at, i.params_at,
                   i.signed_end, key)
