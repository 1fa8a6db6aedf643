"""Directed addressing (supernode pub/sub): addresses, originators, and who gets a directed message.

Addresses (orch = a gateway's name, node = a board's name):

    /orch/node   that one board
    /orch        that gateway only (its applications: SP subscribers, NDN apps)
    /orch/*      that gateway and all its boards
    /*           every gateway
    /*/*         every gateway and every board

The originator is `/orch/node` for a board and `/orch` for a gateway (or an application
on it). Rules, as the supernode pub/sub states them:
- whoever sends a message that its address matches receives its own copy. A board does
  that itself (pubmote_node delivers /*/*, /own-orch/* and /own-orch/own-name locally);
  a gateway delivers to its own applications.
- nothing is ever sent back to the originator, and a gateway drops a message from the
  mesh whose originator is itself (a loop).
- a gateway forwards into the mesh only what it originated or what its own boards and
  applications sent; what came from the mesh is never forwarded again.
On the mesh every directed message travels on one gossip topic, /<realm>/to/*, that every
gateway of the realm subscribes to, and each gateway keeps what is addressed to it. A topic
per gateway would be smaller, but in GossipSub only a topic's subscribers relay it: with
gateways peered statically (not every pair connected) a message for /orch must cross
gateways that are not orch. The supernode design rewrites /*/* into /remote-orch/* per
remote supernode; one gossip message that every gateway reads as "me and my boards" is
the same thing. The addresses and their envelope on the wire: docs/protocols/mesh.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

from pubmote.core.addresses import name_problem

WILDCARD = "*"
# the board topic prefix of directed messages on a gateway: /pubmote/to/<orch>[/<node>]
DIRECTED_PREFIX = b"/pubmote/to/"


class DirectedAddressError(ValueError):
    """A malformed directed address or originator."""


def check_name(name: str, what: str = "name") -> str:
    """A gateway or board name usable in addresses (core.addresses.name_problem)."""
    why = name_problem(name)
    if why is not None:
        raise DirectedAddressError("%s %r cannot be used in directed addresses: %s" % (what, name, why))
    return name


class Address:
    """A parsed address. orch None means every gateway; node None means the gateway itself,
    WILDCARD its boards too, else the one board of that name."""

    __slots__ = ("orch", "node")

    def __init__(self, orch: str | None, node: str | None) -> None:
        self.orch = orch
        self.node = node

    def __str__(self) -> str:
        s = "/" + (self.orch if self.orch is not None else WILDCARD)
        return s if self.node is None else s + "/" + self.node

    def __repr__(self) -> str:
        return "Address(%s)" % self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Address) and (self.orch, self.node) == (other.orch, other.node)

    def __hash__(self) -> int:
        return hash((self.orch, self.node))

    def matches_gateway(self, me: str) -> bool:
        """Whether gateway `me` (its applications) is a receiver."""
        return (self.orch is None or self.orch == me) and self.node in (None, WILDCARD)

    def matches_board(self, me: str, board: str) -> bool:
        """Whether board `board` on gateway `me` is a receiver."""
        if self.orch is not None and self.orch != me:
            return False
        return self.node == WILDCARD or self.node == board

    def leaves_gateway(self, me: str) -> bool:
        """Whether gateway `me` must send it into the mesh (other gateways may match)."""
        return self.orch is None or self.orch != me


def parse_address(text: str) -> Address:
    """`/orch/node`, `/orch`, `/orch/*`, `/*` or `/*/*` -> Address; DirectedAddressError otherwise.
    `%2A` (how an NDN name URI writes *) is read as *."""
    parts = _split(text, "address")
    orch = parts[0]
    node = parts[1] if len(parts) == 2 else None
    if orch == WILDCARD:
        if node not in (None, WILDCARD):
            raise DirectedAddressError("address %r: /*/node is not a directed address" % text)
        return Address(None, node)
    check_name(orch, "gateway")
    if node is not None and node != WILDCARD:
        check_name(node, "board")
    return Address(orch, node)


class Originator:
    """Who sent a directed message: a board (`/orch/node`) or a gateway (`/orch`)."""

    __slots__ = ("orch", "node")

    def __init__(self, orch: str, node: str | None = None) -> None:
        self.orch = check_name(orch, "gateway")
        self.node = check_name(node, "board") if node is not None else None

    def __str__(self) -> str:
        return "/" + self.orch if self.node is None else "/%s/%s" % (self.orch, self.node)

    def __repr__(self) -> str:
        return "Originator(%s)" % self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Originator) and (self.orch, self.node) == (other.orch,
                                                                            other.node)

    def __hash__(self) -> int:
        return hash((self.orch, self.node))


def parse_originator(text: str) -> Originator:
    parts = _split(text, "originator")
    if WILDCARD in parts:
        raise DirectedAddressError("originator %r has a wildcard" % text)
    return Originator(parts[0], parts[1] if len(parts) == 2 else None)


def _split(text: str, what: str) -> list[str]:
    if not isinstance(text, str) or not text.startswith("/") or len(text) > 200:
        raise DirectedAddressError("%s %r must start with /" % (what, text))
    parts = [unquote(p) for p in text[1:].split("/")]
    if len(parts) > 2 or not all(parts):
        raise DirectedAddressError("%s %r must be /orch or /orch/node" % (what, text))
    return parts


def address_from_topic(topic: bytes) -> Address | None:
    """The address in a board topic `/pubmote/to/<orch>[/<node>]`; None if the topic is not
    under /pubmote/to/; DirectedAddressError if it is, but malformed."""
    if not topic.startswith(DIRECTED_PREFIX):
        return None
    try:
        rest = topic[len(DIRECTED_PREFIX) - 1:].decode()
    except UnicodeDecodeError:
        raise DirectedAddressError("directed topic is not text") from None
    return parse_address(rest)


def topic_of(address: Address) -> bytes:
    """The board topic a directed message is delivered on: /pubmote/to/<address>, with * as
    %2A (the canonical NDN URI, as boards and the hub write names)."""
    return DIRECTED_PREFIX[:-1] + str(address).replace(WILDCARD, "%2A").encode()


class Plan:
    """What one gateway does with one directed message."""

    __slots__ = ("apps", "boards", "mesh", "loop")

    def __init__(self, apps: bool, boards: list[str], mesh: bool, loop: bool = False) -> None:
        self.apps = apps      # deliver to this gateway's applications
        self.boards = boards  # deliver to these local boards
        self.mesh = mesh      # send into the mesh
        self.loop = loop      # came back to its originator: dropped

    def __repr__(self) -> str:
        return "Plan(apps=%s, boards=%s, mesh=%s, loop=%s)" % (self.apps, self.boards,
                                                               self.mesh, self.loop)


def plan(address: Address, originator: Originator, me: str, boards: Iterable[str], *,
         from_mesh: bool) -> Plan:
    """Who on gateway `me` (with local `boards`) receives the message, and whether it goes
    into the mesh. Never to the originating board; the originating gateway's applications
    get their own copy when the address matches (the supernode rule: a sender that
    matches gets its own copy)."""
    if from_mesh and originator.orch == me:
        return Plan(False, [], False, loop=True)
    apps = address.matches_gateway(me)
    targets = [b for b in boards
               if address.matches_board(me, b)
               and not (originator.orch == me and originator.node == b)]
    mesh = not from_mesh and address.leaves_gateway(me)
    return Plan(apps, targets, mesh)


def gossip_topic(realm: str) -> str:
    """The gossip topic that carries every directed message of a realm: /<realm>/to/*."""
    return "/%s/to/%s" % (realm, WILDCARD)
