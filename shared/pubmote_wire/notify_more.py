# The notify API a board never calls, loaded through notify.py's module __getattr__ at its
# first use: the msg name, the NotifyAppParam's reading on its own, and a parsed notify's
# inline message and TakenTime.
from .notify import MSG, _params
from .tlv import TLVReader, tl_size, write_tlv


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
