# The board<->bridge control protocol (docs/protocols/control.md), spelt once for both
# sides: the names a board registers and hears hellos on, the registration's parameters
# and its reply, the hello, the fetch of a publisher's message, and the ack Data that
# answers a notify. The board's side is control_core.py, which the firmware imports; here
# besides, the bridge's: decode_register_params, reply_content, encode_hello, notify_topic.
from . import cbor, interest, name, notify
from .control_core import (
    HELLO,
    REGISTER,
    _batch_form,
    decode_reply,
    encode_ack,
    encode_register,
    fetched_nonce,
    register_params,
)

__all__ = [
    "HELLO", "REGISTER", "decode_register_params", "decode_reply", "encode_ack",
    "encode_hello", "encode_register", "fetched_nonce", "notify_topic", "register_params",
    "reply_content",
]


# The bridge's reading of register_params: (board name, prefix Name, filters as bytes,
# served Names, at most 8, the batch form offered (0: none, 1, 2), boot number or None,
# the sleep it announces in ms or None). DecodeError
# for anything but the map the page describes.
def decode_register_params(params):
    from .errors import DecodeError

    info = cbor.loads(params)
    try:
        board = info["name"]
        prefix = info["prefix"]
        filters = info.get("filters", [])
        serve = info.get("serve", [])
    except (KeyError, TypeError, AttributeError):
        raise DecodeError("not a registration") from None
    if (type(board) is not str or type(prefix) is not str or type(filters) is not list
            or type(serve) is not list):
        raise DecodeError("not a registration")
    for f in filters:
        if type(f) is not bytes:
            raise DecodeError("a filter is not a byte string")
    boot = info.get("boot")
    if boot is not None and (type(boot) is not int or boot < 0 or boot >= 16777216):
        raise DecodeError("boot is not a number below 2^24")
    sleep_ms = info.get("sleep")
    if sleep_ms is not None and (type(sleep_ms) is not int or sleep_ms < 0
                                 or sleep_ms >= 4294967296):
        raise DecodeError("sleep is not a number of ms below 2^32")
    served = []
    for s in serve[:8]:  # a board serves at most 8 prefixes besides its own
        served.append(name.from_uri(s))  # DecodeError for a non-str or a bad URI
    return (board, name.from_uri(prefix), filters, served, _batch_form(info), boot,
            sleep_ms)


# The link batch form a registration or its reply names: 0 (none), 1 (records without
# taken-times) or 2 (with them); a later form is read as the latest this codec knows.
# The registration reply's Content: the bridge's NDN prefix (text URI), its clock, and
# the form of the board's link batches it takes (0: none, 1, 2: with taken-times).
def reply_content(gateway, time_ms, batch):
    info = {"gateway": gateway, "time_ms": time_ms}
    if batch:
        info["batch"] = 2 if batch == 2 else 1
    return cbor.dumps(info)


# The hello Interest /pubmote/ctl/hello/<rand> (rand: 4 random bytes; nonce -1: a random
# one) as bytes: a board that hears it registers at once; nobody answers it.
def encode_hello(rand, nonce):
    comp = name.generic(rand)
    buf = bytearray(interest.encode_parts(None, 0, HELLO, comp, nonce=nonce, lifetime_ms=1000))
    interest.encode_parts(buf, 0, HELLO, comp, nonce=nonce, lifetime_ms=1000)
    return bytes(buf)


# The topic of a subscriber's registered /<topic>/notify prefix (NFD's rib/register from
# an NDN app's PubSub), or None for any other prefix.
def notify_topic(prefix):
    comps = name.components(prefix)
    if len(comps) < 2 or bytes(comps[-1]) != notify.NOTIFY:
        return None
    return bytes(prefix[: len(prefix) - len(notify.NOTIFY)])
