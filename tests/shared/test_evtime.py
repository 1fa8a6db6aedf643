# Tests of event time on the wire (docs/protocols/event-time.md): the notify's TakenTime
# element, written from an int (the bridge) or its 8 bytes (a board), parsed back, absent
# when the publisher has no synced clock, malformed ones refused.
import pubmote_wire.interest as ii  # first: the largest module compiles on a clean heap
from pubmote_wire.errors import DecodeError
from pubmote_wire.notify import (
    TAKEN_TIME,
    decode_notify_params,
    encode_msg_data,
    encode_notify_interest,
    inline_msg,
    notify_name,
    notify_params_size,
    parse_notify_interest,
    taken_ms,
    taken_value,
    write_notify_params,
)
from runner import raises, unhex

TOPIC = unhex("080573636f75740805746f706963")  # /scout/topic
PUB = unhex("080573636f75740803707562")  # /scout/pub
NONCE = unhex("cafebabe")


def _enc(fn, *args, **kw):
    buf = bytearray(256)
    n = fn(buf, 1, *args, **kw)
    return bytes(buf[1 : 1 + n])


def _with_params(tail):
    # a notify whose NotifyAppParam is PublisherPrefix, NotifyNonce, then tail's bytes
    params = bytearray(notify_params_size(PUB, NONCE))
    write_notify_params(params, 0, PUB, NONCE)
    params = bytes(params) + unhex(tail)
    return _enc(ii.encode_parts, TOPIC, notify_name(b""), nonce=1, app_params=params), params


# 1700000000123 ms, as a board writes it (the 8 bytes from its clock) and as the bridge
# does (taken_value): the same bytes
TAKEN = 1700000000123
TAKEN_HEX = "f208 0000018bcfe5687b"


def test_notify_with_taken_time():
    plain = _enc(encode_notify_interest, TOPIC, PUB, NONCE, interest_nonce=0x01020304)
    as_int = _enc(encode_notify_interest, TOPIC, PUB, NONCE, interest_nonce=0x01020304,
                  taken=taken_value(TAKEN))
    as_bytes = _enc(encode_notify_interest, TOPIC, PUB, NONCE, interest_nonce=0x01020304,
                    taken=unhex("0000018bcfe5687b"))
    assert as_int == as_bytes and len(as_int) == len(plain) + 10
    assert unhex(TAKEN_HEX) in as_int and TAKEN_TIME == 0xF2
    topic, pub, nonce, fwd, i = parse_notify_interest(as_int)
    assert bytes(topic) == TOPIC and bytes(pub) == PUB and bytes(nonce) == NONCE
    assert taken_ms(i) == TAKEN and i.params_digest_ok and ii.verify_interest(i, as_int)
    assert taken_ms(parse_notify_interest(plain)[4]) is None  # no synced clock: absent
    # with the message inline and a forwarding hint alike
    msg = _enc(encode_msg_data, PUB, TOPIC, NONCE, b"hello")
    w = _enc(encode_notify_interest, TOPIC, PUB, NONCE, inline=msg, taken=taken_value(TAKEN))
    i = parse_notify_interest(w)[4]
    assert taken_ms(i) == TAKEN and bytes(inline_msg(i)) == msg
    w = _enc(encode_notify_interest, TOPIC, PUB, NONCE, fwd_hint=PUB, taken=taken_value(5))
    topic, pub, nonce, fwd, i = parse_notify_interest(w)
    assert taken_ms(i) == 5 and bytes(fwd) == PUB
    # any NonNegativeInteger length; of two, the first; the other elements read as before
    for hx, ms in (("f20105", 5), ("f2020100", 256), ("f20400010000", 65536),
                   ("f20105 f20106", 5)):
        w, params = _with_params(hx)
        assert taken_ms(parse_notify_interest(w)[4]) == ms, hx
        assert bytes(decode_notify_params(params)[1]) == NONCE


def test_malformed_taken_time_refused():
    for hx in ("f203000000", "f200", "f20900000000000000000a"):  # not 1, 2, 4 or 8 bytes
        w, _ = _with_params(hx)
        assert raises(DecodeError, parse_notify_interest, w), hx


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_evtime")
