# NDN Data packets (v0.3): Name, MetaInfo, Content, SignatureInfo, SignatureValue; encode
# into a caller's buffer (signature over Name..SignatureInfo), decode into memoryviews.
# The codec itself is data_core.py, which a board imports; here besides, what a board
# seldom or never calls: encode_data, data_size, encode (a board's answer to an Interest
# for its named data) and verify_data (a board with a key, at registration).
from .data_core import BLOB, DATA, Data, decode_data, encode_parts

__all__ = ["BLOB", "DATA", "Data", "data_size", "decode_data", "encode", "encode_data",
           "encode_parts", "verify_data"]


# name is a Name (bytes-like TLV-VALUE); final_block_id is a whole component TLV.
# MetaInfo is written only when one of its fields is given; signer=None signs with
# DigestSha256.
def encode_data(buf, off, name, content=None, *, content_type=None, freshness_ms=None,
                final_block_id=None, signer=None):
    return encode_parts(buf, off, name, None, None, None, content, content_type, freshness_ms,
                        final_block_id, signer)


# Bytes encode_data will write for the same arguments.
def data_size(name, content=None, **kw):
    return encode_data(None, 0, name, content, **kw)


# Convenience: the Data packet as bytes (name may also be a URI str here).
def encode(name, content=None, **kw):
    if isinstance(name, str):
        from .name import from_uri

        name = from_uri(name)
    buf = bytearray(encode_data(None, 0, name, content, **kw))
    encode_data(buf, 0, name, content, **kw)
    return bytes(buf)


# Check the signature of a decoded Data against its input bytes.
def verify_data(d, buf, key=None):
    if d.signed_end < 0:
        return False
    from .verify import verify2

    return verify2(d.sig_type, d.sig_value, buf, d.signed_start, d.signed_end, -1, -1, key)
