# NDN notify pub/sub, what a board uses: ndn-python-repo PubSub packets, byte-compatible
# with its PubSub: the notify Interest /<topic>/notify carrying NotifyAppParam, the msg
# Interest and Data /<publisher>/msg/<topic>/<nonce>, and the ack Data answering the notify
# Interest. Names are written from their parts (no concatenated bytes) and parsed in place.
# notify.py is the whole API: this and what a board never calls (msg_name,
# decode_notify_params, inline_msg, taken_ms), which would be heap on every board.
from . import data_core as _data
from . import interest_core as _interest
from . import namewire, tlv
from .compat import const
from .errors import DecodeError
from .signature import DIGEST

NOTIFY_NONCE = const(0x80)
PUBLISHER_FWD_HINT = const(0xD3)
# pubmote's inline message (board link only): the message Data itself inside
# NotifyAppParam, so the subscriber need not fetch it. Even, so non-critical: a subscriber
# that does not know it ignores it and fetches as ndn-python-repo's PubSub does
# (docs/protocols/board-link.md).
INLINE_MSG = const(0xF0)
# pubmote's taken-time: when the message was taken, ms since 1970 by the publisher's
# clock (a NonNegativeInteger; absent: the publisher has no synced clock). Even, so
# non-critical too (docs/protocols/event-time.md).
TAKEN_TIME = const(0xF2)
APP_PARAM = const(0x24)
_NAME = const(0x07)
# the components notify and msg (pubmote_wire.control matches names with them too)
NOTIFY = b"\x08\x06notify"
MSG = b"\x08\x03msg"
DEFAULT_LIFETIME_MS = const(4000)


# /<topic>/notify (without the ParametersSha256Digest the Interest adds).
def notify_name(topic):
    return bytes(topic) + NOTIFY


# Bytes of the NotifyAppParam value (what goes inside ApplicationParameters).
# taken: TakenTime's value, the 8 bytes of a NonNegativeInteger (taken_value), or None.
def notify_params_size(publisher, nonce, fwd_hint=None, taken=None):
    n = 0 if taken is None else tlv.tl_size(TAKEN_TIME, len(taken))
    if publisher is not None:
        n += tlv.tl_size(_NAME, len(publisher))
    if nonce is not None:
        n += tlv.tl_size(NOTIFY_NONCE, len(nonce))
    if fwd_hint is not None:
        n += tlv.tl_size(PUBLISHER_FWD_HINT, tlv.tl_size(_NAME, len(fwd_hint)))
    return n


# Write the NotifyAppParam value at buf[off]; return the bytes written.
def write_notify_params(buf, off, publisher, nonce, fwd_hint=None, taken=None):
    p = off
    if publisher is not None:
        p += tlv.write_tlv(buf, p, _NAME, publisher)
    if nonce is not None:
        p += tlv.write_tlv(buf, p, NOTIFY_NONCE, nonce)
    if fwd_hint is not None:
        p += tlv.write_tl(buf, p, PUBLISHER_FWD_HINT, tlv.tl_size(_NAME, len(fwd_hint)))
        p += tlv.write_tlv(buf, p, _NAME, fwd_hint)
    if taken is not None:
        p += tlv.write_tlv(buf, p, TAKEN_TIME, taken)
    return p - off


# The NotifyAppParam value of a notify carrying its message inline (no forwarding hint).
def _write_params_inline(buf, off, publisher, nonce, inline, taken):
    p = off + write_notify_params(buf, off, publisher, nonce, None, taken)
    p += tlv.write_tlv(buf, p, INLINE_MSG, inline)
    return p - off


# Parse the NotifyAppParam value mv (a memoryview) with the readers r and q, setting
# o.notify_publisher, o.notify_nonce, o.notify_fwd_hint, o.notify_inline (the inline
# message Data) and o.notify_taken (TakenTime's value): attributes, not a tuple.
def _params(o, r, q, mv):
    o.notify_publisher = o.notify_nonce = o.notify_fwd_hint = o.notify_inline = None
    o.notify_taken = None
    r.reset(mv)
    rank = 0
    while r.next():
        t = r.typ
        if t == INLINE_MSG:  # ours, wherever it is (non-critical: no order of its own)
            if o.notify_inline is None:
                o.notify_inline = mv[r.vstart : r.vend]
            continue
        if t == TAKEN_TIME:  # likewise; read as an int only when asked (taken_ms)
            k = r.vend - r.vstart
            if k != 1 and k != 2 and k != 4 and k != 8:
                raise DecodeError("bad TakenTime")
            if o.notify_taken is None:
                o.notify_taken = mv[r.vstart : r.vend]
            continue
        k = 1 if t == _NAME else 2 if t == NOTIFY_NONCE else 3 if t == PUBLISHER_FWD_HINT else 0
        if k <= rank:  # unknown, repeated or out of order
            if tlv.is_critical(t):
                raise DecodeError("unknown critical TLV")
            continue
        rank = k
        if k == 1:
            namewire.walk(mv, r.vstart, r.vend, False)
            o.notify_publisher = mv[r.vstart : r.vend]
        elif k == 2:
            o.notify_nonce = mv[r.vstart : r.vend]
        else:
            q.reset(mv, r.vstart, r.vend)
            while q.next():
                if q.typ == _NAME and o.notify_fwd_hint is None:
                    namewire.walk(mv, q.vstart, q.vend, False)
                    o.notify_fwd_hint = mv[q.vstart : q.vend]
                elif tlv.is_critical(q.typ):
                    raise DecodeError("unknown critical TLV")


# Write the notify Interest /<topic>/notify/<params-digest> at buf[off]; return its
# size. Signed with DigestSha256 unless another signer (or None: unsigned) is given.
def encode_notify_interest(buf, off, topic, publisher, nonce, *, fwd_hint=None,
                           interest_nonce=None, lifetime_ms=DEFAULT_LIFETIME_MS,
                           signer=DIGEST, sig_nonce=None, sig_time_ms=None, inline=None,
                           taken=None):
    # sig_nonce/sig_time_ms: the SignatureNonce and SignatureTime of a signed Interest
    # (boards in realms that require HmacWithSha256 send both, against replay).
    # inline: the message Data's bytes, carried in the notify (INLINE_MSG; no fwd_hint).
    # taken: when the message was taken (TAKEN_TIME): its value's 8 bytes (taken_value)
    if inline is not None:
        if fwd_hint is not None:
            raise ValueError("an inline message goes without a forwarding hint")
        return _interest.encode_parts(buf, off, topic, NOTIFY,
                            nonce=-1 if interest_nonce is None else interest_nonce,
                            lifetime_ms=lifetime_ms, signer=signer, sig_nonce=sig_nonce,
                            sig_time_ms=sig_time_ms,
                            params_len=notify_params_size(publisher, nonce, None, taken)
                            + tlv.tl_size(INLINE_MSG, len(inline)),
                            fill=_write_params_inline, fill_a=publisher, fill_b=nonce,
                            fill_c=inline, fill_d=taken)
    return _interest.encode_parts(buf, off, topic, NOTIFY,
                        nonce=-1 if interest_nonce is None else interest_nonce,
                        lifetime_ms=lifetime_ms, signer=signer, sig_nonce=sig_nonce,
                        sig_time_ms=sig_time_ms,
                        params_len=notify_params_size(publisher, nonce, fwd_hint, taken),
                        fill=write_notify_params, fill_a=publisher, fill_b=nonce, fill_c=fwd_hint,
                        fill_d=taken)


# Write the subscriber's Interest /<publisher>/msg/<topic>/<nonce>; fwd_hint is the
# publisher's forwarding-hint Name from the notify, if any.
def encode_msg_interest(buf, off, publisher, topic, nonce, *, interest_nonce=None,
                        lifetime_ms=DEFAULT_LIFETIME_MS, fwd_hint=None):
    return _interest.encode_parts(buf, off, publisher, MSG, topic, nonce, forwarding_hint=fwd_hint,
                        nonce=-1 if interest_nonce is None else interest_nonce,
                        lifetime_ms=lifetime_ms)


# Write the publisher's message Data /<publisher>/msg/<topic>/<nonce>.
def encode_msg_data(buf, off, publisher, topic, nonce, content, *, signer=None):
    return _data.encode_parts(buf, off, publisher, MSG, topic, nonce, content, _data.BLOB, None,
                              None, signer)


# Write the subscriber's empty ack Data named exactly as the notify Interest.
def encode_ack_data(buf, off, notify_interest_full_name, *, signer=None):
    return _data.encode_parts(buf, off, notify_interest_full_name, None, None, None, None,
                              _data.BLOB, None, None, signer)


# TakenTime's value for ms since 1970 (a board writes it from small ints: its clock.py).
def taken_value(ms):
    return ms.to_bytes(8, "big")


# Decode a notify Interest: (topic, publisher, nonce, fwd_hint, interest). topic is
# the name without its trailing notify and ParametersSha256Digest components.
def parse_notify_interest(buf, into=None):
    return notify_parts(_interest.decode_interest(buf, into), buf)


# The same from an Interest already decoded from buf (a forwarder decodes every Interest
# once to route it: no second decode for the notifies among them).
def notify_parts(i, buf):
    ns = i.name_start
    dp = i.digest_at
    if i.app_params is None or dp != i.name_end - 34:
        raise DecodeError("not a notify Interest")
    # Find the component just before the digest: it must be the generic "notify".
    p = ns
    last = -1
    while p < dp:
        last = p
        p = namewire.comp_end(buf, p, dp)
    if last < 0 or dp - last != 8:
        raise DecodeError("not a notify Interest")
    k = 0
    while k < 8:  # compared in place: no slice
        if buf[last + k] != NOTIFY[k]:
            raise DecodeError("not a notify Interest")
        k += 1
    # The Interest's readers are free again: parse the parameters with them.
    _params(i, i.reader, i.reader2, i.app_params)
    return i.name[: last - ns], i.notify_publisher, i.notify_nonce, i.notify_fwd_hint, i
