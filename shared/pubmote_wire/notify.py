# NDN notify pub/sub: ndn-python-repo PubSub packets, byte-compatible with its PubSub:
# the notify Interest /<topic>/notify carrying NotifyAppParam, the msg Interest and Data
# /<publisher>/msg/<topic>/<nonce>, and the ack Data answering the notify Interest.
# The codec itself is notify_core.py, which a board imports; here besides, what a board
# never calls: msg_name, decode_notify_params, inline_msg and taken_ms.
from .notify_core import (
    APP_PARAM,
    DEFAULT_LIFETIME_MS,
    DIGEST,
    INLINE_MSG,
    MSG,
    NOTIFY,
    NOTIFY_NONCE,
    PUBLISHER_FWD_HINT,
    TAKEN_TIME,
    _params,
    encode_ack_data,
    encode_msg_data,
    encode_msg_interest,
    encode_notify_interest,
    notify_name,
    notify_params_size,
    notify_parts,
    parse_notify_interest,
    taken_value,
    write_notify_params,
)
from .tlv import TLVReader, tl_size, write_tlv

__all__ = [
    "APP_PARAM", "DEFAULT_LIFETIME_MS", "DIGEST", "INLINE_MSG", "MSG", "NOTIFY",
    "NOTIFY_NONCE", "PUBLISHER_FWD_HINT", "TAKEN_TIME", "decode_notify_params",
    "encode_ack_data", "encode_msg_data", "encode_msg_interest", "encode_notify_interest",
    "inline_msg", "msg_name", "notify_name", "notify_params_size", "notify_parts",
    "parse_notify_interest", "taken_ms", "taken_value", "write_notify_params",
]


# /<publisher>/msg/<topic>/<nonce>.
def msg_name(publisher, topic, nonce):
    b = bytearray(tl_size(8, len(nonce)))
    write_tlv(b, 0, 8, nonce)
    return bytes(publisher) + MSG + bytes(topic) + b


# (publisher Name or None, nonce or None, forwarding-hint Name or None), as
# memoryviews, from a NotifyAppParam value.
def decode_notify_params(buf):
    r = TLVReader(b"")
    _params(r, r, TLVReader(b""), memoryview(buf))
    return r.notify_publisher, r.notify_nonce, r.notify_fwd_hint


# The inline message Data (a memoryview) of a notify parsed by parse_notify_interest, or
# None when the notify carries none.
def inline_msg(i):
    return i.notify_inline


# The TakenTime (ms since 1970, an int) of a notify parsed by parse_notify_interest, or
# None when it carries none (its publisher has no synced clock, or predates the element).
def taken_ms(i):
    v = i.notify_taken
    return None if v is None else int.from_bytes(bytes(v), "big")
