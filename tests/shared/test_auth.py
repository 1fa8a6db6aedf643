# Board authentication on the wire: HmacWithSha256 notify Interests carrying SignatureNonce
# and SignatureTime, and HMAC-signed message Data, made and checked on every runtime.
import pubmote_wire.interest as interest  # first: the largest module compiles on a clean heap
from pubmote_wire import data, notify
from pubmote_wire.errors import DecodeError
from pubmote_wire.hmac256 import HmacSigner
from pubmote_wire.signature import HMAC_SHA256
from runner import raises, unhex

KEY = unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
# /secure/sim1/x and /pubmote/node/sim1 as Name values (name.py itself is not needed here,
# which keeps this suite inside a 64 kB heap when compiled from source)
TOPIC = b"\x08\x06secure\x08\x04sim1\x08\x01x"
PUB = b"\x08\x07pubmote\x08\x04node\x08\x04sim1"


def _notify(key, sig_nonce=b"\x01\x02\x03\x04\x05\x06\x07\x08", t=1700000000000):
    buf = bytearray(300)
    n = notify.encode_notify_interest(buf, 0, TOPIC, PUB, b"\xca\xfe\xba\xbe",
                                      interest_nonce=5, signer=HmacSigner(key),
                                      sig_nonce=sig_nonce, sig_time_ms=t)
    return bytes(buf[0:n])


def test_signed_notify_carries_nonce_and_time_and_verifies():
    pkt = _notify(KEY)
    topic, pub, nonce, _, i = notify.parse_notify_interest(pkt)
    assert bytes(topic) == TOPIC and bytes(pub) == PUB and bytes(nonce) == b"\xca\xfe\xba\xbe"
    assert i.sig_type == HMAC_SHA256
    assert bytes(i.sig_nonce) == b"\x01\x02\x03\x04\x05\x06\x07\x08"
    assert i.sig_time_ms == 1700000000000
    assert interest.verify_interest(i, pkt, KEY)


def test_wrong_key_and_tampering_fail():
    pkt = _notify(KEY)
    i = interest.decode_interest(pkt)
    assert not interest.verify_interest(i, pkt, b"another key")
    # the ParametersSha256Digest covers the signature: a tampered one fails at parse
    bad = bytearray(pkt)
    bad[-1] ^= 0x01
    assert raises(DecodeError, interest.decode_interest, bytes(bad))


def test_signed_msg_data():
    buf = bytearray(300)
    n = notify.encode_msg_data(buf, 0, PUB, TOPIC, b"\xca\xfe\xba\xbe", b"21.5",
                               signer=HmacSigner(KEY))
    pkt = bytes(buf[0:n])
    d = data.decode_data(pkt)
    assert d.sig_type == HMAC_SHA256 and bytes(d.content) == b"21.5"
    assert data.verify_data(d, pkt, KEY) and not data.verify_data(d, pkt, b"nope")


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_auth")
