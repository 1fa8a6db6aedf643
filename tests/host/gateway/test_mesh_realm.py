"""DeP2P realms on the mesh: topic names, the board-topic mapping, realm membership and the
validators (accept / reject / ignore / throttle)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pubmote.gateway.mesh.envelope import Envelope
from pubmote.gateway.mesh.realm import (
    ACCEPT,
    IGNORE,
    REJECT,
    THROTTLE,
    Realm,
    RealmError,
    Validators,
    check_realm,
    check_roots,
    load_members,
    parse_gossip_topic,
    pub_topic,
    topic_root,
)
from pubmote.p2p import KeyPair


class Msg:
    """What a validator sees of a GossipMessage."""

    def __init__(self, topic: str, data: bytes, from_peer: object, msg_id: bytes = b"",
                 received_from: object = "peer") -> None:
        self.topic = topic
        self.data = data
        self.from_peer = from_peer
        self.msg_id = msg_id or os.urandom(8)
        self.received_from = received_from


def envelope(topic: str = "/pubmote/demo/sim1/temperature", **kw: object) -> bytes:
    base: dict[str, object] = {"topic": topic, "payload": b"21.5", "board": "sim1",
                               "gateway": "gw1", "ts_ms": 1, "epoch": 1, "seq": 1}
    base.update(kw)
    return Envelope(**base).encode()  # type: ignore[arg-type]


def test_topic_mapping() -> None:
    assert topic_root(b"/pubmote/demo/sim1/temperature") == "pubmote"
    assert topic_root("/x") == "x"
    assert pub_topic("home", b"/pubmote/demo/sim1/temperature") == "/home/pub/*"
    roots = ["pubmote", "*"]
    assert pub_topic("home", b"/pubmote/demo/t", roots) == "/home/pub/pubmote"
    assert pub_topic("home", b"/alarms/kitchen", roots) == "/home/pub/*"
    assert pub_topic("home", b"/alarms/kitchen", ["pubmote"]) is None
    assert pub_topic("home", b"no-slash") is None
    assert parse_gossip_topic("/home/pub/pubmote") == ("home", "pub", "pubmote")
    for bad in ("/home/pub", "home/pub/x", "/home/pub/x/y", "/home//x"):
        with pytest.raises(RealmError):
            parse_gossip_topic(bad)
    assert check_roots(["/pubmote/", "*", "pubmote"]) == ["pubmote", "*"]
    for bad in ("a/b", "", "sp ace", "x" * 65):
        with pytest.raises(RealmError):
            check_roots([bad])


def test_realm_names() -> None:
    assert check_realm("home-2.lab_x") == "home-2.lab_x"
    for bad in ("", "a/b", "*", "..", "a b", "é"):
        with pytest.raises(RealmError):
            check_realm(bad)


def test_members_from_peer_ids_and_key_files(tmp_path: Path) -> None:
    a, b = KeyPair.generate(), KeyPair.generate()
    kf = tmp_path / "b.key"
    kf.write_bytes(b.encode_private())
    kf.chmod(0o600)
    members = load_members([str(a.peer_id), str(kf), " "])
    assert members == [a.peer_id, b.peer_id]
    with pytest.raises(RealmError):
        load_members(["not-a-peer-id"])
    loose = tmp_path / "loose.key"
    loose.write_bytes(b.encode_private())
    loose.chmod(0o644)
    with pytest.raises(RealmError):  # a key others can read is refused, with the reason
        load_members([str(loose)])


def test_realm_validator_closed_and_open() -> None:
    me, member, outsider = (KeyPair.generate().peer_id for _ in range(3))
    closed = Realm("home", [member], self_id=me)
    assert not closed.open
    t = "/home/pub/*"
    assert closed.validate(Msg(t, b"", member)) == ACCEPT
    assert closed.validate(Msg(t, b"", me)) == ACCEPT
    assert closed.validate(Msg(t, b"", outsider)) == REJECT
    assert closed.validate(Msg(t, b"", None)) == REJECT
    assert closed.counters == {"accepted": 2, "outsiders": 1, "unsigned": 1}
    opened = Realm("home")
    assert opened.open and "OPEN" in opened.describe()
    assert opened.validate(Msg(t, b"", outsider)) == ACCEPT


def validators(members: list[object] | None = None) -> Validators:
    v = Validators(Realm("home", members or []))  # type: ignore[arg-type]
    v.add("/home/pub/", v.pub_validator, prefix=True)
    v.add("/home/to/", v.to_validator, prefix=True)
    return v


def test_pub_validator() -> None:
    peer = KeyPair.generate().peer_id
    v = validators()
    assert v.validate(Msg("/home/pub/*", envelope(), peer)) == ACCEPT
    assert v.validate(Msg("/home/pub/pubmote", envelope(), peer)) == ACCEPT
    # a board topic outside the gossip topic's root, a directed envelope, garbage
    assert v.validate(Msg("/home/pub/alarms", envelope(), peer)) == REJECT
    assert v.validate(Msg("/home/pub/*", envelope(address="/*", originator="/gw1"),
                          peer)) == REJECT
    assert v.validate(Msg("/home/pub/*", b"\xff\x00garbage", peer)) == REJECT
    assert v.validate(Msg("/home/pub/*", b"", peer)) == REJECT
    assert v.counters["bad_envelopes"] == 2
    assert v.counters[ACCEPT] == 2 and v.counters[REJECT] == 4


def test_to_validator() -> None:
    peer = KeyPair.generate().peer_id
    v = validators()
    good = envelope(address="/gw2/sim1", originator="/gw1/sim1")
    assert v.validate(Msg("/home/to/*", good, peer)) == ACCEPT
    for bad in (envelope(),                                             # not directed
                envelope(address="/gw2", originator="/gw3"),            # not its originator
                envelope(address="/*/x", originator="/gw1"),            # bad address
                envelope(address="/gw2", originator="/gw1/*")):         # bad originator
        assert v.validate(Msg("/home/to/*", bad, peer)) == REJECT


def test_decoded_once_for_the_handler() -> None:
    peer = KeyPair.generate().peer_id
    v = validators()
    m = Msg("/home/pub/*", envelope(seq=9), peer, msg_id=b"id1")
    assert v.validate(m) == ACCEPT
    assert b"id1" in v.decoded
    e = v.take(m)
    assert e is not None and e.seq == 9
    assert b"id1" not in v.decoded
    v2 = Validators(Realm("home"), keep=3)
    v2.add("/home/pub/", v2.pub_validator, prefix=True)
    for i in range(10):
        v2.validate(Msg("/home/pub/*", envelope(), peer, msg_id=b"%d" % i))
    assert len(v2.decoded) == 3  # bounded


def test_own_messages_skip_validation() -> None:
    v = validators([KeyPair.generate().peer_id])
    assert v.validate(Msg("/home/pub/*", b"junk", None, received_from=None)) == ACCEPT


def test_per_topic_validators_first_non_accept_decides() -> None:
    peer = KeyPair.generate().peer_id
    v = validators()
    calls: list[str] = []

    def throttle(m: object) -> str:
        calls.append("t")
        return THROTTLE

    def ignore(m: object) -> str:
        calls.append("i")
        return IGNORE

    def broken(m: object) -> str:
        raise RuntimeError("bug")

    v.add("/home/pub/pubmote", throttle)
    v.add("/home/pub/pubmote", ignore)
    assert v.validate(Msg("/home/pub/pubmote", envelope(), peer)) == THROTTLE
    assert calls == ["t"]
    v.add("/home/pub/*", broken)
    assert v.validate(Msg("/home/pub/*", envelope(), peer)) == REJECT
    assert v.counters["validator_errors"] == 1
    v.add("/home/pub/x", lambda m: "maybe")
    assert v.validate(Msg("/home/pub/x", envelope("/x/y"), peer)) == REJECT
    outsider_v = validators([KeyPair.generate().peer_id])
    assert outsider_v.validate(Msg("/home/pub/*", envelope(), peer)) == REJECT
