# Tests of pubmote_wire.control (the board<->bridge control protocol): the exact bytes of
# docs/protocols/control.md on every runtime, and malformed registrations refused.
# unix-heap: 96k (it loads interest, data, name, notify, cbor and hmac256 at once, compiled
# from source: twice their size on the 64-bit port)
from pubmote_wire import cbor, control, data, interest, name, notify
from pubmote_wire.errors import DecodeError
from runner import raises, unhex

# docs/protocols/control.md: board b1, prefix /pubmote/node/b1, filter /cmd/, nonce
# 0a0b0c0d, lifetime 1500 ms, unsigned; the reply from gw1; the hello
REGISTER_HEX = (
    "0585073e08077075626d6f7465080363746c080872656769737465720802623102206887cbc8e6f00316d8"
    "78b3baf94eab0442686835597ca6410373cb35dad32cab12000a040a0b0c0d0c0205dc2437a4646e616d65"
    "6262316573657276658066707265666978702f7075626d6f74652f6e6f64652f62316766696c7465727381"
    "452f636d642f")
REPLY_HEX = (
    "0698073e08077075626d6f7465080363746c080872656769737465720802623102206887cbc8e6f00316d8"
    "78b3baf94eab0442686835597ca6410373cb35dad32cab1403190100152aa267676174657761796f2f7075"
    "626d6f74652f67772f6777316774696d655f6d731b0000018bcfe5680016031b01001720d61ad020563d3c"
    "25020358ad3bf6caf623ee32653891844dc6c0405234e05df6")
HELLO_HEX = "0527071b08077075626d6f7465080363746c080568656c6c6f0804010203040a040a0b0c0d0c0203e8"
PREFIX = "/pubmote/node/b1"


def _register(nonce):
    params = control.register_params("b1", PREFIX, [b"/cmd/"], [], False, None, None)
    buf = bytearray(256)
    n = control.encode_register(buf, 0, b"b1", params, nonce, 1500, None, None, None)
    return bytes(buf[0:n])


def test_names():
    assert name.to_uri(control.REGISTER) == "/pubmote/ctl/register"
    assert name.to_uri(control.HELLO) == "/pubmote/ctl/hello"


def test_register_exact():
    assert _register(0x0A0B0C0D) == unhex(REGISTER_HEX)


def test_register_random_nonce():
    a = interest.decode_interest(_register(-1))
    assert a.must_be_fresh and a.params_digest_ok and a.lifetime_ms == 1500
    assert bytes(a.name)[: len(control.REGISTER)] == control.REGISTER


def test_register_signed_with_the_boards_key():
    from pubmote_wire.hmac256 import HmacSigner

    key = b"k" * 32
    params = control.register_params("b1", PREFIX, [], [], False, None, None)
    buf = bytearray(300)
    n = control.encode_register(buf, 0, b"b1", params, 1, 1500, HmacSigner(key), b"12345678",
                                1700000000000)
    pkt = bytes(buf[0:n])
    i = interest.decode_interest(pkt)
    assert interest.verify_interest(i, pkt, key)
    assert not interest.verify_interest(i, pkt, b"x" * 32)


def test_register_params_round_trip():
    params = control.register_params("b1", PREFIX, [b"/cmd/", b""], ["/b1/data", "/b1/x"],
                                     False, 12345, None)
    board, prefix, filters, served, batch, boot, sleep_ms = control.decode_register_params(params)
    assert board == "b1" and prefix == name.from_uri(PREFIX) and batch == 0
    assert boot == 12345 and sleep_ms is None
    assert filters == [b"/cmd/", b""]
    assert served == [name.from_uri("/b1/data"), name.from_uri("/b1/x")]
    # what the bridge reads from the page's packet
    i = interest.decode_interest(unhex(REGISTER_HEX))
    assert control.decode_register_params(bytes(i.app_params))[2] == [b"/cmd/"]


def test_register_params_optional_lists():
    board, _, filters, served, batch, boot, sleep_ms = control.decode_register_params(
        cbor.dumps({"name": "b2", "prefix": "/p"}))
    assert (board, filters, served, batch, boot, sleep_ms) == ("b2", [], [], 0, None, None)


def test_sleep_announced():
    # a registration that says the board sleeps for sleep_ms once answered
    # (docs/protocols/sleep.md); the key is there only when announced
    params = control.register_params("b1", PREFIX, [b"/cmd/"], [], False, 7, 10000)
    assert cbor.loads(params)["sleep"] == 10000
    assert control.decode_register_params(params)[6] == 10000
    assert control.decode_register_params(params)[5] == 7


def test_batch_offer_and_acceptance():
    # link batches (docs/protocols/link-batch.md): the key is there only when offered
    offer = control.register_params("b1", PREFIX, [], [], True, None, None)
    assert cbor.loads(offer)["batch"] == 1
    assert control.decode_register_params(offer)[4] == 1
    assert "batch" not in cbor.loads(control.register_params("b1", PREFIX, [], [], False, None, None))
    taken = control.reply_content("/g", 5, True)
    assert control.decode_reply(taken) == ("/g", 5, 1)
    assert "batch" not in cbor.loads(control.reply_content("/g", 5, False))


def test_timed_batch_form():
    # form 2: records with taken-times (docs/protocols/event-time.md); a later form is
    # read as the latest known, so a newer board still gets batches
    offer = control.register_params("b1", PREFIX, [], [], 2, None, None)
    assert cbor.loads(offer)["batch"] == 2
    assert control.decode_register_params(offer)[4] == 2
    later = cbor.dumps({"name": "b1", "prefix": PREFIX, "batch": 3})
    assert control.decode_register_params(later)[4] == 2
    assert control.decode_reply(control.reply_content("/g", 5, 2)) == ("/g", 5, 2)
    assert control.decode_reply(cbor.dumps({"batch": 7}))[2] == 2
    assert control.decode_reply(cbor.dumps({"batch": True}))[2] == 1


def test_register_serves_at_most_eight():
    many = ["/s/%d" % k for k in range(12)]
    params = control.register_params("b", "/p", [], many, False, None, None)
    served = control.decode_register_params(params)[3]
    assert served == [name.from_uri(u) for u in many[0:8]]


def test_register_params_malformed():
    bad = (
        b"",
        b"\xff",
        cbor.dumps([1, 2]),
        cbor.dumps("b1"),
        cbor.dumps({"prefix": "/p"}),
        cbor.dumps({"name": "b"}),
        cbor.dumps({"name": 5, "prefix": "/p"}),
        cbor.dumps({"name": "b", "prefix": b"/p"}),
        cbor.dumps({"name": "b", "prefix": "/p", "filters": "/cmd/"}),
        cbor.dumps({"name": "b", "prefix": "/p", "filters": ["/cmd/"]}),
        cbor.dumps({"name": "b", "prefix": "/p", "serve": "/x"}),
        cbor.dumps({"name": "b", "prefix": "/p", "serve": [7]}),
        cbor.dumps({"name": "b", "prefix": "/p", "boot": -1}),
        cbor.dumps({"name": "b", "prefix": "/p", "boot": 16777216}),
        cbor.dumps({"name": "b", "prefix": "/p", "boot": "7"}),
        cbor.dumps({"name": "b", "prefix": "/p", "sleep": -1}),
        cbor.dumps({"name": "b", "prefix": "/p", "sleep": 4294967296}),
        cbor.dumps({"name": "b", "prefix": "/p", "sleep": 1.5}),
    )
    for b in bad:
        raises(DecodeError, control.decode_register_params, b)


def test_reply_exact():
    full = bytes(interest.decode_interest(unhex(REGISTER_HEX)).name)
    content = control.reply_content("/pubmote/gw/gw1", 1700000000000, False)
    pkt = data.encode(full, content, freshness_ms=0, signer=notify.DIGEST)
    assert pkt == unhex(REPLY_HEX)
    d = data.decode_data(pkt)
    assert control.decode_reply(d.content) == ("/pubmote/gw/gw1", 1700000000000, False)


def test_reply_decoded_leniently():
    # a bridge that sends no clock (or another map) is still an answer
    assert control.decode_reply(cbor.dumps({"gateway": "/g"})) == ("/g", None, False)
    assert control.decode_reply(cbor.dumps({})) == (None, None, False)
    raises(DecodeError, control.decode_reply, cbor.dumps([1]))
    raises(DecodeError, control.decode_reply, b"\xa1")


def test_hello_exact():
    assert control.encode_hello(unhex("01020304"), 0x0A0B0C0D) == unhex(HELLO_HEX)
    i = interest.decode_interest(control.encode_hello(b"abcd", -1))
    assert bytes(i.name)[: len(control.HELLO)] == control.HELLO and i.lifetime_ms == 1000


def test_ack_is_the_notify_subscribers():
    nm = name.from_uri("/t/notify") + b"\x02\x20" + bytes(32)
    buf = bytearray(200)
    n = notify.encode_ack_data(buf, 0, nm, signer=notify.DIGEST)
    ack = control.encode_ack(nm)
    assert bytes(ack) == bytes(buf[0:n])
    d = data.decode_data(bytes(ack))
    assert bytes(d.name) == nm and not d.content


def test_fetched_nonce():
    prefix = name.from_uri("/pubmote/gw/gw1")
    fetch = notify.msg_name(prefix, name.from_uri("/a/b"), b"\xca\xfe\xba\xbe")
    assert control.fetched_nonce(fetch, prefix) == b"\xca\xfe\xba\xbe"
    other = notify.msg_name(name.from_uri("/pubmote/gw/gw2"), name.from_uri("/a"), b"\x01")
    assert control.fetched_nonce(other, prefix) is None
    assert control.fetched_nonce(prefix + name.generic(b"data"), prefix) is None


def test_notify_topic():
    topic = name.from_uri("/sensors/t1")
    assert control.notify_topic(topic + name.generic(b"notify")) == topic
    assert control.notify_topic(name.generic(b"notify")) is None  # no topic
    assert control.notify_topic(topic) is None
    # the last component's value merely ending in the component's bytes
    assert control.notify_topic(topic + name.generic(b"x\x08\x06notify")) is None


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_control")
