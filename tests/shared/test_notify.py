# Tests of pubmote_wire.notify against the ndn-python-repo PubSub capture (exact bytes).
# unix-heap: 96k (it compiles interest.py, the largest codec module, from source on a 64-bit heap)
import pubmote_wire.interest as ii  # first: the largest module compiles on a clean heap
import vectors
from pubmote_wire.data import decode_data, verify_data
from pubmote_wire.errors import DecodeError
from pubmote_wire.notify import (
    INLINE_MSG,
    decode_notify_params,
    encode_ack_data,
    encode_msg_data,
    encode_msg_interest,
    encode_notify_interest,
    inline_msg,
    msg_name,
    notify_name,
    notify_params_size,
    parse_notify_interest,
    write_notify_params,
)
from runner import raises, unhex

TOPIC = unhex("080573636f75740805746f706963")  # /scout/topic
PUB = unhex("080573636f75740803707562")  # /scout/pub
NONCE = unhex("cafebabe")
V = vectors.ndn_notify()


def _enc(fn, *args, **kw):
    buf = bytearray(256)
    n = fn(buf, 1, *args, **kw)
    return bytes(buf[1 : 1 + n])


def test_names():
    assert notify_name(TOPIC) == TOPIC + b"\x08\x06notify"
    assert msg_name(PUB, TOPIC, NONCE) == PUB + b"\x08\x03msg" + TOPIC + b"\x08\x04" + NONCE


def test_notify_interest_exact():
    w = _enc(encode_notify_interest, TOPIC, PUB, NONCE, interest_nonce=0x01020304)
    assert w == V["notify Interest"]


def test_parse_notify_interest():
    w = V["notify Interest"]
    for into in (None, ii.Interest()):
        topic, pub, nonce, fwd, i = parse_notify_interest(w, into)
        assert bytes(topic) == TOPIC and bytes(pub) == PUB and bytes(nonce) == NONCE
        assert fwd is None and i.nonce == 0x01020304 and i.lifetime_ms == 4000
        assert i.sig_type == 0 and i.params_digest_ok and ii.verify_interest(i, w)


def test_notify_with_inline_message():
    msg = _enc(encode_msg_data, PUB, TOPIC, NONCE, b"hello")
    w = _enc(encode_notify_interest, TOPIC, PUB, NONCE, interest_nonce=0x01020304, inline=msg)
    plain = V["notify Interest"]
    # the same notify with one more NotifyAppParam element: FC <len> <the message Data>
    tail = bytes([INLINE_MSG, len(msg)]) + msg
    assert tail in w and len(w) == len(plain) + len(tail)
    topic, pub, nonce, fwd, i = parse_notify_interest(w)
    assert bytes(topic) == TOPIC and bytes(pub) == PUB and bytes(nonce) == NONCE
    assert fwd is None and bytes(inline_msg(i)) == msg
    assert i.params_digest_ok and ii.verify_interest(i, w)
    assert inline_msg(parse_notify_interest(plain)[4]) is None
    assert raises(ValueError, lambda: _enc(encode_notify_interest, TOPIC, PUB, NONCE,
                                            fwd_hint=TOPIC, inline=msg))


def test_msg_interest_exact_and_parse():
    w = _enc(encode_msg_interest, PUB, TOPIC, NONCE, interest_nonce=0x05060708)
    assert w == V["msg Interest"]
    w = _enc(encode_msg_interest, PUB, TOPIC, NONCE, fwd_hint=TOPIC)
    i = ii.decode_interest(w)
    assert [bytes(f) for f in i.forwarding_hint] == [TOPIC] and i.nonce is not None


def test_msg_data_exact_and_parse():
    w = _enc(encode_msg_data, PUB, TOPIC, NONCE, b"hello")
    assert w == V["msg Data"]
    d = decode_data(w)
    assert bytes(d.name) == msg_name(PUB, TOPIC, NONCE)
    assert bytes(d.content) == b"hello" and d.content_type == 0 and verify_data(d, w)


def test_ack_data_exact():
    i = parse_notify_interest(V["notify Interest"])[4]
    assert _enc(encode_ack_data, i.name) == V["notify ack Data"]
    d = decode_data(V["notify ack Data"])
    assert d.content is None and bytes(d.name) == bytes(i.name)


def test_params_roundtrip():
    for fwd in (None, PUB):
        n = notify_params_size(PUB, NONCE, fwd)
        buf = bytearray(n)
        assert write_notify_params(buf, 0, PUB, NONCE, fwd) == n
        pub, nonce, f = decode_notify_params(buf)
        assert bytes(pub) == PUB and bytes(nonce) == NONCE
        assert (f is None) if fwd is None else bytes(f) == fwd
    w = _enc(encode_notify_interest, TOPIC, PUB, NONCE, fwd_hint=PUB, signer=None)
    topic, pub, nonce, fwd, i = parse_notify_interest(w)
    assert bytes(fwd) == PUB and i.sig_type is None and bytes(topic) == TOPIC
    assert decode_notify_params(b"") == (None, None, None)


BAD_PARAMS = [
    "07",  # truncated
    "0702",  # Name past end
    "07020000",  # type-0 component
    "0100",  # unknown critical
    "d3020800",  # fwd hint with a critical non-Name
    "80010007020801",  # Name after the nonce (out of order, critical)
]


def test_bad_params():
    for hx in BAD_PARAMS:
        assert raises(DecodeError, decode_notify_params, unhex(hx)), hx
    assert decode_notify_params(unhex("fc00800101"))[1] is not None


def test_not_a_notify_interest():
    assert raises(DecodeError, parse_notify_interest, V["msg Interest"])
    w = _enc(encode_msg_interest, PUB, TOPIC, NONCE)
    assert raises(DecodeError, parse_notify_interest, w)
    w = V["notify Interest"]
    for n in range(len(w)):
        assert raises(DecodeError, parse_notify_interest, w[:n])


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_notify")
