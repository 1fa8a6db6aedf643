# ndn-python-repo PubSub packets (seed 000), byte-compatible with its PubSub: the notify
# Interest /<topic>/notify carrying NotifyAppParam, the msg Interest and Data
# /<publisher>/msg/<topic>/<nonce>, and the ack Data answering the notify Interest.
from .compat import const
from .data import BLOB, encode_data
from .errors import DecodeError
from .interest import _encode, decode_interest
from .signature import DigestSigner, _comp_end, _walk
from .tlv import TLVReader, is_critical, tl_size, write_tl, write_tlv

NOTIFY_NONCE = const(0x80)
PUBLISHER_FWD_HINT = const(0xD3)
APP_PARAM = const(0x24)
_NAME = const(0x07)
_NOTIFY = b"\x08\x06notify"
_MSG = b"\x08\x03msg"
DEFAULT_LIFETIME_MS = const(4000)
DIGEST = DigestSigner()

try:
    from os import urandom

    def _rand32():
        return int.from_bytes(urandom(4), "big")

except ImportError:  # some MicroPython ports have no os.urandom
    import random

    def _rand32():
        return random.getrandbits(32)


# /<topic>/notify (without the ParametersSha256Digest the Interest adds).
def _generic(v):
    b = bytearray(tl_size(8, len(v)))
    write_tlv(b, 0, 8, v)
    return bytes(b)


def notify_name(topic):
    return bytes(topic) + _NOTIFY


# /<publisher>/msg/<topic>/<nonce>.
def msg_name(publisher, topic, nonce):
    return bytes(publisher) + _MSG + bytes(topic) + _generic(nonce)


# Bytes of the NotifyAppParam value (what goes inside ApplicationParameters).
def notify_params_size(publisher, nonce, fwd_hint=None):
    n = 0
    if publisher is not None:
        n += tl_size(_NAME, len(publisher))
    if nonce is not None:
        n += tl_size(NOTIFY_NONCE, len(nonce))
    if fwd_hint is not None:
        n += tl_size(PUBLISHER_FWD_HINT, tl_size(_NAME, len(fwd_hint)))
    return n


# Write the NotifyAppParam value at buf[off]; return the bytes written.
def write_notify_params(buf, off, publisher, nonce, fwd_hint=None):
    p = off
    if publisher is not None:
        p += write_tlv(buf, p, _NAME, publisher)
    if nonce is not None:
        p += write_tlv(buf, p, NOTIFY_NONCE, nonce)
    if fwd_hint is not None:
        p += write_tl(buf, p, PUBLISHER_FWD_HINT, tl_size(_NAME, len(fwd_hint)))
        p += write_tlv(buf, p, _NAME, fwd_hint)
    return p - off


# (publisher Name or None, nonce or None, forwarding-hint Name or None), as
# memoryviews, from a NotifyAppParam value.
def decode_notify_params(buf):
    mv = memoryview(buf)
    r = TLVReader(mv)
    publisher = nonce = fwd = None
    rank = 0
    while r.next():
        t = r.typ
        k = 1 if t == _NAME else 2 if t == NOTIFY_NONCE else 3 if t == PUBLISHER_FWD_HINT else 0
        if k <= rank:  # unknown, repeated or out of order
            if is_critical(t):
                raise DecodeError("unknown or misplaced critical TLV")
            continue
        rank = k
        if k == 1:
            _walk(mv, r.vstart, r.vend, False)
            publisher = r.value()
        elif k == 2:
            nonce = r.value()
        else:
            q = TLVReader(mv, r.vstart, r.vend)
            while q.next():
                if q.typ == _NAME and fwd is None:
                    _walk(mv, q.vstart, q.vend, False)
                    fwd = q.value()
                elif is_critical(q.typ):
                    raise DecodeError("unknown critical TLV in PublisherFwdHint")
    return publisher, nonce, fwd


# Write the notify Interest /<topic>/notify/<params-digest> at buf[off]; return its
# size. Signed with DigestSha256 unless another signer (or None: unsigned) is given.
def encode_notify_interest(buf, off, topic, publisher, nonce, *, fwd_hint=None,
                           interest_nonce=None, lifetime_ms=DEFAULT_LIFETIME_MS,
                           signer=DIGEST):
    if interest_nonce is None:
        interest_nonce = _rand32()
    return _encode(buf, off, bytes(topic) + _NOTIFY, False, False, None, interest_nonce,
                   lifetime_ms, None, notify_params_size(publisher, nonce, fwd_hint), signer,
                   None, None, None, write_notify_params, publisher, nonce, fwd_hint)


# Write the subscriber's Interest /<publisher>/msg/<topic>/<nonce>; fwd_hint is the
# publisher's forwarding-hint Name from the notify, if any.
def encode_msg_interest(buf, off, publisher, topic, nonce, *, interest_nonce=None,
                        lifetime_ms=DEFAULT_LIFETIME_MS, fwd_hint=None):
    if interest_nonce is None:
        interest_nonce = _rand32()
    fh = None if fwd_hint is None else [fwd_hint]
    return _encode(buf, off, msg_name(publisher, topic, nonce), False, False, fh,
                   interest_nonce, lifetime_ms, None, None, None, None, None, None,
                   None, None, None, None)


# Write the publisher's message Data /<publisher>/msg/<topic>/<nonce>.
def encode_msg_data(buf, off, publisher, topic, nonce, content, *, signer=None):
    return encode_data(buf, off, msg_name(publisher, topic, nonce), content,
                       content_type=BLOB, signer=signer)


# Write the subscriber's empty ack Data named exactly as the notify Interest.
def encode_ack_data(buf, off, notify_interest_full_name, *, signer=None):
    return encode_data(buf, off, notify_interest_full_name, None, content_type=BLOB,
                       signer=signer)


# Decode a notify Interest: (topic, publisher, nonce, fwd_hint, interest). topic is
# the name without its trailing notify and ParametersSha256Digest components.
def parse_notify_interest(buf, into=None):
    i = decode_interest(buf, into)
    name = i.name
    e = len(name)
    dp = i._dp - i._ns
    if i.app_params is None or dp != e - 34:
        raise DecodeError("notify Interest needs parameters and a trailing digest")
    # Find the component just before the digest: it must be the generic "notify".
    p = 0
    last = -1
    while p < dp:
        last = p
        p = _comp_end(name, p, dp)[2]
    if last < 0 or name[last:dp] != _NOTIFY:
        raise DecodeError("not a notify Interest name")
    publisher, nonce, fwd = decode_notify_params(i.app_params)
    return name[:last], publisher, nonce, fwd, i
