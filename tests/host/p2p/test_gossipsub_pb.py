"""The pubsub RPC protobuf codec: exact bytes, round trips, bounds, a table of malformed
RPCs, and StrictSign signatures checked against messages js-libp2p and py-libp2p signed."""

from __future__ import annotations

import pytest

from pubmote.p2p import KeyPair, PeerId, ProtocolError
from pubmote.p2p.codec import encode_uvarint, pb_bytes, pb_varint
from pubmote.p2p.pubsub.router import verify_signature
from pubmote.p2p.pubsub.rpc import (
    MAX_IDS,
    RPC,
    SIGN_PREFIX,
    Control,
    Message,
    PeerInfo,
    Prune,
    frame,
)

# Messages on topic "/pubmote/vector/1" with data "pubmote vector", captured from the
# gossipsub of js-libp2p (@libp2p/gossipsub 17) and of py-libp2p 0.8 as they reached us.
JS_SIGNED = bytes.fromhex(
    "0a26002408011220f1f51ffbd6ba06ab6a6a223eb0a8468c3e25a11095fa97ba2705e9680af49d7412"
    "0e7075626d6f746520766563746f721a0818eaa31764a9f84122112f7075626d6f74652f766563746f"
    "722f312a403ba8da37995d3cadd9cf7607b1cb90e5efebb2b1a83ce6e6cad559cf2a104c97c0f510e9"
    "42c3b662e1ed057361015d8f99d0e7d0ed8ac2ab9f38ccdf1bea820e322408011220f1f51ffbd6ba06"
    "ab6a6a223eb0a8468c3e25a11095fa97ba2705e9680af49d74")
PY_SIGNED = bytes.fromhex(
    "0a260024080112208e273f41ce3fb631bb513d77a5becd9f929dc4ef023aa23ee09d3fc18d8d3c0112"
    "0e7075626d6f746520766563746f721a08000000006b0409a522112f7075626d6f74652f766563746f"
    "722f312a40905314d47ed21202d8e330b12b443ec1f0fbdb1ef7f9f910568381a3e54bf94197b73209"
    "1a52914a763cf113b24cba959bb02f0cf3ad2d04dd8f9001f331ee023224080112208e273f41ce3fb6"
    "31bb513d77a5becd9f929dc4ef023aa23ee09d3fc18d8d3c01")


def verify(msg: Message) -> bool:
    assert msg.from_ is not None
    return verify_signature(msg, PeerId(msg.from_))


def test_rpc_exact_bytes() -> None:
    ctl = Control()
    ctl.graft.append("t")
    ctl.ihave.append(("t", [b"\x01\x02"]))
    ctl.iwant.append([b"\x03"])
    ctl.prune.append(Prune("t", backoff_s=60))
    ctl.idontwant.append([b"\x04"])
    msg = Message(from_=b"\x00\x01", data=b"hi", seqno=b"\x00" * 7 + b"\x01", topic="t")
    rpc = RPC(subscriptions=[(True, "t"), (False, "u")], publish=[msg], control=ctl)
    want = (
        "0a050801120174" "0a050800120175"                       # SubOpts x2
        + "1215" "0a020001" "12026869" "1a080000000000000001" "220174"  # Message
        + "1a" "1f"                                              # control
        + "0a07" "0a0174" "12020102"                             # ihave
        + "1203" "0a0103"                                        # iwant
        + "1a03" "0a0174"                                        # graft
        + "2205" "0a0174" "183c"                                 # prune backoff 60
        + "2a03" "0a0104")                                       # idontwant
    assert rpc.encode().hex() == want.replace(" ", "")
    assert frame(b"\x01\x02") == b"\x02\x01\x02"


def test_rpc_round_trip() -> None:
    ctl = Control()
    ctl.graft += ["a", "b"]
    ctl.prune.append(Prune("a", [PeerInfo(b"\x00\x02ab", b"rec")], 10))
    ctl.ihave.append(("a", [b"x" * 40, b"y" * 40]))
    ctl.iwant.append([b"z"])
    ctl.idontwant.append([b"w"])
    m = Message(from_=b"\x00\x01", data=b"d" * 1000, seqno=b"12345678", topic="/r/c/t",
                signature=b"s" * 64, key=b"k" * 36)
    rpc = RPC.decode(RPC(subscriptions=[(True, "a")], publish=[m, m], control=ctl).encode())
    assert rpc.subscriptions == [(True, "a")]
    assert [(p.topic, p.data, p.seqno, p.signature, p.key) for p in rpc.publish] == \
        [("/r/c/t", b"d" * 1000, b"12345678", b"s" * 64, b"k" * 36)] * 2
    assert rpc.publish[0].raw == m.raw
    c = rpc.control
    assert c is not None
    assert c.graft == ["a", "b"] and c.iwant == [[b"z"]] and c.idontwant == [[b"w"]]
    assert c.ihave == [("a", [b"x" * 40, b"y" * 40])]
    assert c.prune[0].topic == "a" and c.prune[0].backoff_s == 10
    assert c.prune[0].peers[0].peer_id == b"\x00\x02ab"
    assert c.prune[0].peers[0].signed_record == b"rec"


def test_unknown_fields_are_skipped_and_kept_for_signing() -> None:
    # An unknown varint field (9) in a message stays in the bytes that were signed.
    body = pb_bytes(1, b"\x00\x01") + pb_bytes(2, b"x") + pb_varint(9, 5) + pb_bytes(4, "t")
    m = Message.decode(body + pb_bytes(5, b"sig"))
    assert m.signed_payload() == SIGN_PREFIX + body
    # Unknown RPC fields and fixed-width fields are skipped.
    rpc = RPC.decode(pb_varint(7, 1) + b"\x4d\x00\x00\x00\x00" + pb_bytes(1, pb_bytes(2, "t")))
    assert rpc.subscriptions == [(False, "t")]


def test_repeated_control_merges() -> None:
    one = Control()
    one.graft.append("a")
    two = Control()
    two.graft.append("b")
    raw = pb_bytes(3, one.encode()) + pb_bytes(3, two.encode())
    ctl = RPC.decode(raw).control
    assert ctl is not None and ctl.graft == ["a", "b"]


def _many(field: int, item: bytes, n: int) -> bytes:
    return b"".join(pb_bytes(field, item) for _ in range(n))


MALFORMED = [
    ("truncated varint key", b"\x8a"),
    ("length beyond input", b"\x0a\x05ab"),
    ("field number zero", b"\x02\x00"),
    ("group wire type", b"\x0b"),
    ("non-minimal varint", b"\x08\x80\x00"),
    ("varint too long", b"\x08" + b"\xff" * 10 + b"\x01"),
    ("subscription not bytes", pb_varint(1, 3)),
    ("subscription without topic", pb_bytes(1, pb_varint(1, 1))),
    ("subscribe flag as bytes", pb_bytes(1, pb_bytes(1, b"x") + pb_bytes(2, "t"))),
    ("topic not UTF-8", pb_bytes(1, pb_bytes(2, b"\xff\xfe"))),
    ("topic too long", pb_bytes(1, pb_bytes(2, "t" * 2000))),
    ("message without topic", pb_bytes(2, pb_bytes(2, b"x"))),
    ("message with two topics", pb_bytes(2, pb_bytes(4, "a") + pb_bytes(4, "b"))),
    ("message data as varint", pb_bytes(2, pb_varint(2, 1) + pb_bytes(4, "a"))),
    ("truncated message", pb_bytes(2, b"\x0a\x10abc")),
    ("control as varint", pb_varint(3, 1)),
    ("ihave id too long", pb_bytes(3, pb_bytes(1, pb_bytes(2, b"i" * 600)))),
    ("prune backoff as bytes", pb_bytes(3, pb_bytes(4, pb_bytes(1, "t") + pb_bytes(3, b"x")))),
    ("too many subscriptions", _many(1, pb_bytes(2, "t"), 1025)),
    ("too many control entries", pb_bytes(3, _many(3, pb_bytes(1, "t"), 1025))),
    ("too many ids", pb_bytes(3, pb_bytes(2, _many(1, b"i", MAX_IDS + 1)))),
    ("too many PX peers", pb_bytes(3, pb_bytes(4, _many(2, pb_bytes(1, b"p"), 65)))),
    ("truncated fixed64", b"\x49\x00\x00"),
]


@pytest.mark.parametrize("label,data", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_rpcs_raise_protocol_error(label: str, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        RPC.decode(data)


def test_rpc_size_bound() -> None:
    big = pb_bytes(2, pb_bytes(2, b"x" * 2000) + pb_bytes(4, "t"))
    with pytest.raises(ProtocolError):
        RPC.decode(big, max_size=1000)
    assert len(RPC.decode(big).publish) == 1


def test_prefix_garbage_never_escapes_as_other_errors() -> None:
    # Every prefix of a valid RPC is either valid or a ProtocolError, never IndexError.
    ctl = Control()
    ctl.prune.append(Prune("t", [PeerInfo(b"p")], 5))
    ctl.ihave.append(("t", [b"abc"]))
    m = Message(from_=b"\x00\x01", data=b"x", seqno=b"1", topic="t", signature=b"s")
    raw = RPC([(True, "t")], [m], ctl).encode()
    for n in range(len(raw)):
        try:
            RPC.decode(raw[:n])
        except ProtocolError:
            pass
    for i in range(len(raw)):
        mutated = raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:]
        try:
            RPC.decode(mutated)
        except ProtocolError:
            pass


@pytest.mark.parametrize("raw", [JS_SIGNED, PY_SIGNED], ids=["js-libp2p", "py-libp2p"])
def test_signatures_of_other_implementations_verify(raw: bytes) -> None:
    m = Message.decode(raw)
    assert m.topic == "/pubmote/vector/1" and m.data == b"pubmote vector"
    assert verify(m)
    # What was signed: the prefix and the message without signature and key.
    assert m.signed_payload() == SIGN_PREFIX + m.unsigned_bytes()
    tampered = Message.decode(raw.replace(b"pubmote vector", b"pubmote vectoR"))
    assert not verify(tampered)


def test_our_signature_by_hand() -> None:
    key = KeyPair.from_seed(bytes(range(32)))
    me = key.peer_id
    m = Message(from_=me.raw, data=b"pubmote vector", seqno=bytes(7) + b"\x01",
                topic="/pubmote/vector/1")
    # The signed bytes spelled out: prefix, then fields 1..4 in order.
    signed = (b"libp2p-pubsub:" + b"\x0a" + encode_uvarint(len(me.raw)) + me.raw
              + b"\x12\x0epubmote vector" + b"\x1a\x08" + bytes(7) + b"\x01"
              + b"\x22\x11/pubmote/vector/1")
    assert SIGN_PREFIX + m.unsigned_bytes() == signed
    m.signature = key.sign(signed)
    m.raw = m.encode()
    assert verify(Message.decode(m.raw))
    # A key field that belongs to someone else: the from/key check refuses it.
    other = KeyPair.from_seed(bytes(32))
    m.key = other.public.encode()
    m.raw = m.encode()
    assert not verify(Message.decode(m.raw))
    # No signature at all.
    assert not verify(Message(from_=me.raw, data=b"x", seqno=b"1", topic="t"))
