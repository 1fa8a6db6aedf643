# The board<->bridge control protocol (docs/protocols/control.md), the board's side: the
# names a board registers and hears hellos on, the registration's parameters, the reading
# of its reply, the fetch of a publisher's message, and the ack Data that answers a notify.
# control.py is the whole protocol, spelt once for both sides: this and the bridge's side
# (the reading of the parameters, the reply, the hello), which would be heap on a board.
from . import cbor, name
from . import interest_core as interest
from . import notify_core as notify

# Names as bytes literals: frozen code keeps them in flash (built at import: heap)
REGISTER = b"\x08\x07pubmote\x08\x03ctl\x08\x08register"  # /pubmote/ctl/register
HELLO = b"\x08\x07pubmote\x08\x03ctl\x08\x05hello"  # /pubmote/ctl/hello
# The components msg and notify are notify's (notify.MSG, notify.NOTIFY). On a board each
# module global here is heap, and this module's table is at a size's edge: numbers are
# written where used, DecodeError imported where raised (errors is loaded anyway), and
# no function takes a default argument (a heap object per function, a dict for
# keyword-only ones, for as long as the module is loaded).


# The registration's ApplicationParameters: a CBOR map (docs/protocols/control.md).
# filters: byte strings; prefix and serve: text URIs; batch: offer link batches, 2 with
# taken-times in their records, 1 without (docs/protocols/link-batch.md; the key is left
# out when not offered); boot: a number the
# board drew at start-up (below 2^24: a small int on every port), so the bridge tells a
# restarted board, which lost what it was given, from one re-registering (None: left out);
# sleep_ms: the board goes to sleep for that long once answered, and the bridge keeps its
# session meanwhile (docs/protocols/sleep.md; None: left out, the board is awake).
def register_params(board, prefix, filters, serve, batch, boot, sleep_ms):
    info = {"name": board, "prefix": prefix, "filters": filters, "serve": serve}
    if batch:
        info["batch"] = 2 if batch == 2 else 1
    if boot is not None:
        info["boot"] = boot
    if sleep_ms is not None:
        info["sleep"] = sleep_ms
    return cbor.dumps(info)


# Write the registration Interest /pubmote/ctl/register/<board>/params-sha256=... at
# buf[off] (MustBeFresh, params from register_params; nonce -1: a random one; signer None,
# or an HmacSigner with SignatureNonce and SignatureTime); return the bytes written.
# board is the name as bytes.
def encode_register(buf, off, board, params, nonce, lifetime_ms, signer, sig_nonce,
                    sig_time_ms):
    return interest.encode_parts(buf, off, REGISTER, name.generic(board), must_be_fresh=True,
                                 nonce=nonce, lifetime_ms=lifetime_ms, app_params=params,
                                 signer=signer, sig_nonce=sig_nonce, sig_time_ms=sig_time_ms)


def _batch_form(info):
    v = info.get("batch")
    if type(v) is int and v >= 2:
        return 2
    return 1 if v else 0


# The board's reading of reply_content: (gateway URI or None, time_ms or None, the batch
# form accepted: 0, 1 or 2).
def decode_reply(content):
    info = cbor.loads(content)
    if type(info) is not dict:
        from .errors import DecodeError

        raise DecodeError("not a registration reply")
    return info.get("gateway"), info.get("time_ms"), _batch_form(info)


# The ack of a notify Interest: an empty Data of the notify's full name, DigestSha256, as
# a memoryview of a buffer of its own.
def encode_ack(notify_name):
    buf = bytearray(len(notify_name) + 96)  # the ack's TLV headers, DigestSha256: ~50 B
    n = notify.encode_ack_data(buf, 0, notify_name, signer=notify.DIGEST)
    return memoryview(buf)[0:n]


# The NotifyNonce a fetch names when nm is /<prefix>/msg/.../<nonce> (a fetch of one of
# prefix's messages), else None.
def fetched_nonce(nm, prefix):
    plen = len(prefix)
    if nm[:plen] != prefix or nm[plen : plen + len(notify.MSG)] != notify.MSG:
        return None
    comps = name.components(nm)
    return bytes(name.component_type_value(comps[-1])[1])
