"""Directed addressing: parsing, matching, loop avoidance and self-delivery."""

from __future__ import annotations

import pytest

from pubmote.gateway.mesh.directed import (
    Address,
    DirectedAddressError,
    Originator,
    address_from_topic,
    gossip_topic,
    parse_address,
    parse_originator,
    plan,
    topic_of,
)
from pubmote.gateway.mesh.relay import DirectedError, parse_directed_payload
from pubmote_wire import cbor

FORMS = [
    ("/gw2/sim1", "gw2", "sim1"),
    ("/gw2", "gw2", None),
    ("/gw2/*", "gw2", "*"),
    ("/*", None, None),
    ("/*/*", None, "*"),
    ("/%2A/%2A", None, "*"),  # how an NDN name URI writes *
    ("/gw2/%2A", "gw2", "*"),
]


@pytest.mark.parametrize("text,orch,node", FORMS)
def test_parse_every_form(text: str, orch: str | None, node: str | None) -> None:
    a = parse_address(text)
    assert (a.orch, a.node) == (orch, node)
    assert parse_address(str(a)) == a


BAD = ["", "gw2", "/", "//", "/gw2/", "/gw2/sim1/x", "/*/sim1", "/gw|2", "/g w", "/gw2//",
       "/" + "g" * 70, "/gw2/" + "n" * 70, "/%2F"]


@pytest.mark.parametrize("text", BAD)
def test_bad_addresses(text: str) -> None:
    with pytest.raises(DirectedAddressError):
        parse_address(text)


def test_originators() -> None:
    assert parse_originator("/gw1/sim1") == Originator("gw1", "sim1")
    assert str(parse_originator("/gw1")) == "/gw1"
    for bad in ("/*", "/gw1/*", "gw1", "/a/b/c"):
        with pytest.raises(DirectedAddressError):
            parse_originator(bad)


def test_topic_mapping_both_ways() -> None:
    for text, _, _ in FORMS:
        a = parse_address(text)
        t = topic_of(a)
        assert t.startswith(b"/pubmote/to/")
        assert address_from_topic(t) == a
    assert topic_of(parse_address("/*/*")) == b"/pubmote/to/%2A/%2A"
    assert address_from_topic(b"/pubmote/demo/x") is None
    with pytest.raises(DirectedAddressError):
        address_from_topic(b"/pubmote/to/a/b/c")
    assert gossip_topic("home") == "/home/to/*"


BOARDS = ["sim1", "sim2", "sim3"]


def who(address: str, originator: Originator, me: str = "gw1",
        from_mesh: bool = False) -> tuple[bool, list[str], bool, bool]:
    p = plan(parse_address(address), originator, me, BOARDS, from_mesh=from_mesh)
    return p.apps, p.boards, p.mesh, p.loop


B1 = Originator("gw1", "sim1")   # board sim1 on gw1 sends
GW1 = Originator("gw1")          # gateway gw1 (an SP/NDN app on it) sends
REMOTE = Originator("gw9", "x")  # a board on another gateway sent it, via the mesh

# (address, originator, from_mesh) -> (gateway apps, boards, into the mesh)
CASES = [
    # a board on gw1 sends
    ("/gw1/sim2", B1, False, (False, ["sim2"], False)),
    ("/gw1/sim1", B1, False, (False, [], False)),        # to itself: the board keeps it
    ("/gw1", B1, False, (True, [], False)),
    ("/gw1/*", B1, False, (True, ["sim2", "sim3"], False)),  # not back to the sender
    ("/*", B1, False, (True, [], True)),
    ("/*/*", B1, False, (True, ["sim2", "sim3"], True)),
    ("/gw2/sim1", B1, False, (False, [], True)),
    ("/gw2", B1, False, (False, [], True)),
    ("/gw2/*", B1, False, (False, [], True)),
    # the gateway itself sends: it matches /gw1, /gw1/*, /*, /*/* and gets its own copy
    ("/gw1", GW1, False, (True, [], False)),
    ("/gw1/*", GW1, False, (True, BOARDS, False)),
    ("/*", GW1, False, (True, [], True)),
    ("/*/*", GW1, False, (True, BOARDS, True)),
    ("/gw2", GW1, False, (False, [], True)),
    # arriving from the mesh: delivered here, never sent on
    ("/gw1/sim3", REMOTE, True, (False, ["sim3"], False)),
    ("/gw1", REMOTE, True, (True, [], False)),
    ("/gw1/*", REMOTE, True, (True, BOARDS, False)),
    ("/*", REMOTE, True, (True, [], False)),
    ("/*/*", REMOTE, True, (True, BOARDS, False)),
    ("/gw2/sim1", REMOTE, True, (False, [], False)),    # for someone else: ignored
    ("/gw2", REMOTE, True, (False, [], False)),
]


@pytest.mark.parametrize("address,originator,from_mesh,want", CASES)
def test_plan(address: str, originator: Originator, from_mesh: bool,
              want: tuple[bool, list[str], bool]) -> None:
    apps, boards, mesh, loop = who(address, originator, from_mesh=from_mesh)
    assert (apps, boards, mesh) == want
    assert not loop


@pytest.mark.parametrize("address", ["/*", "/*/*", "/gw1", "/gw1/*", "/gw1/sim2"])
def test_loop_back_to_originator_is_dropped(address: str) -> None:
    for orig in (B1, GW1):
        apps, boards, mesh, loop = who(address, orig, from_mesh=True)
        assert loop and not apps and not boards and not mesh


def test_address_matching() -> None:
    a = Address(None, "*")
    assert a.matches_gateway("x") and a.matches_board("x", "b") and a.leaves_gateway("x")
    a = parse_address("/gw1/sim1")
    assert not a.matches_gateway("gw1") and a.matches_board("gw1", "sim1")
    assert not a.matches_board("gw1", "sim2") and not a.matches_board("gw2", "sim1")


def test_directed_payload_forms() -> None:
    assert parse_directed_payload(b"/cmd/led|on") == ("/cmd/led", b"on", None)
    assert parse_directed_payload(b"/cmd/led|a|b") == ("/cmd/led", b"a|b", None)
    assert parse_directed_payload(cbor.dumps({"t": "/x", "p": b"\x00", "ts": 5})) == (
        "/x", b"\x00", 5)
    for bad in (b"", b"no-bar", b"cmd|x", b"\xa1", cbor.dumps({"t": 1}),
                cbor.dumps({"t": "/x", "p": "text"}), cbor.dumps({"t": "/x", "ts": -1}),
                b"\xff\xfe|x"):
        with pytest.raises(DirectedError):
            parse_directed_payload(bad)
