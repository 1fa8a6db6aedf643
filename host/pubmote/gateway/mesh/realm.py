"""DeP2P's pub/sub model on the gossip mesh: realms, topic names `/<realm>/<category>/<topic>`,
per-topic validators, and the realm validator (only members may publish into a realm).

Mapping between the bridge's board topics and gossip topics:

    board topic  /<root>/<rest...>    e.g. /pubmote/demo/sim1/temperature
    gossip topic /<realm>/pub/<root>   e.g. /home/pub/pubmote   (root listed in mesh_topic)
                 /<realm>/pub/*        every other root         (when mesh_topic has *)

The category `pub` carries relayed messages; the whole board topic travels in the
envelope, and the topic validator rejects an envelope whose board topic does not lie under
the gossip topic's root. `mesh_topic` (default ["*"]: one gossip topic for everything)
lists the roots that get a gossip topic of their own; a root not listed, without *, stays
on its gateway. Every gateway of a realm should list the same roots: in GossipSub only a
topic's subscribers relay it. The category `to` carries directed messages, all on
/<realm>/to/* (see directed.py).

Validators return "accept", "reject" (the message is dropped and the peer that relayed it
is penalised), "ignore" (dropped, no penalty) or "throttle" (dropped: the sender is over
a rate limit), as DeP2P names them. Described for other implementers in
docs/protocols/mesh.md.
"""

from __future__ import annotations

import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pubmote.gateway.mesh.envelope import Envelope, EnvelopeError
from pubmote.p2p.identity import PeerId, load_or_create_key

log = logging.getLogger("pubmote.mesh.realm")

ACCEPT, REJECT, IGNORE, THROTTLE = "accept", "reject", "ignore", "throttle"
RESULTS = (ACCEPT, REJECT, IGNORE, THROTTLE)
PUB = "pub"
TO = "to"
_COMPONENT = re.compile(r"^[A-Za-z0-9._~%*-]{1,64}$")


class RealmError(ValueError):
    """A bad realm name, topic or member entry."""


class GossipLike(Protocol):
    """What validators read of a gossip message (GossipMessage has it)."""

    topic: str
    data: bytes
    from_peer: Any


Validator = Callable[[GossipLike], str]


def check_component(text: str, what: str) -> str:
    if not _COMPONENT.match(text) or text in (".", ".."):
        raise RealmError("%s %r: use 1-64 of A-Z a-z 0-9 . _ ~ -" % (what, text))
    return text


def check_realm(name: str) -> str:
    if "*" in name or "%" in name:
        raise RealmError("realm %r: no * or %%" % name)
    return check_component(name, "realm")


def topic_root(board_topic: bytes | str) -> str:
    """The first component of a board topic URI: /pubmote/demo/x -> pubmote."""
    t = board_topic.decode(errors="replace") if isinstance(board_topic, bytes) else board_topic
    if not t.startswith("/") or len(t) < 2:
        raise RealmError("board topic %r is not a URI with a component" % t)
    return t[1:].split("/", 1)[0]


def gossip_topic(realm: str, category: str, topic: str) -> str:
    return "/%s/%s/%s" % (realm, category, topic)


def pub_topic(realm: str, board_topic: bytes | str, roots: Iterable[str] = ("*",)) -> str | None:
    """The gossip topic that carries `board_topic` in `realm` with `roots` (mesh_topic):
    its root's own topic if listed, else /<realm>/pub/* if * is listed, else None."""
    try:
        root = topic_root(board_topic)
    except RealmError:
        return None
    roots = tuple(roots)
    if root in roots and root != "*":
        return gossip_topic(realm, PUB, root)
    if "*" in roots:
        return gossip_topic(realm, PUB, "*")
    return None


def check_roots(roots: Iterable[str]) -> list[str]:
    """mesh_topic entries: * or a board-topic root (one name component)."""
    out = []
    for entry in roots:
        r = entry.strip().strip("/")
        if r != "*":
            check_component(r, "mesh topic root")
        if r not in out:
            out.append(r)
    return out


def parse_gossip_topic(topic: str) -> tuple[str, str, str]:
    """`/<realm>/<category>/<topic>` -> (realm, category, topic); RealmError otherwise."""
    parts = topic.split("/")
    if len(parts) != 4 or parts[0] != "" or not all(parts[1:]):
        raise RealmError("gossip topic %r is not /<realm>/<category>/<topic>" % topic)
    return parts[1], parts[2], parts[3]


def under_root(board_topic: str, root: str) -> bool:
    return board_topic == "/" + root or board_topic.startswith("/" + root + "/")


def load_members(entries: Iterable[str]) -> list[PeerId]:
    """Realm members from base58 PeerIds or identity key files (their PeerId is used)."""
    out: list[PeerId] = []
    for entry in entries:
        e = entry.strip()
        if not e:
            continue
        if os.path.exists(e):
            try:
                out.append(load_or_create_key(e, create=False).peer_id)
            except (OSError, ValueError) as err:
                raise RealmError("realm member key file %s: %s" % (e, err)) from None
            continue
        try:
            out.append(PeerId.from_base58(e))
        except Exception as err:  # noqa: BLE001 - any parse failure is the same user error
            raise RealmError("realm member %r is neither a PeerId nor a key file (%s)"
                             % (e, err)) from None
    return out


class Realm:
    """A realm: its name and member gateways (an empty member list is an open realm)."""

    def __init__(self, name: str, members: Iterable[PeerId] = (), *,
                 self_id: PeerId | None = None) -> None:
        self.name = check_realm(name)
        self.members = set(members)
        # a gateway that joins a realm publishes into it; the others decide whether they
        # accept it (their member lists), so our own key needs no entry in ours
        self.self_id = self_id
        self.counters = {"accepted": 0, "outsiders": 0, "unsigned": 0}

    @property
    def open(self) -> bool:
        return not self.members

    def is_member(self, peer: PeerId | None) -> bool:
        return peer is not None and (self.open or peer in self.members
                                     or peer == self.self_id)

    def validate(self, msg: GossipLike) -> str:
        """The realm validator: REJECT unless the message's signed `from` is a member."""
        peer = msg.from_peer
        if peer is None:
            self.counters["unsigned"] += 1
            return REJECT
        if not self.is_member(peer):
            self.counters["outsiders"] += 1
            log.warning("realm %s: rejected a message on %s from outsider %s", self.name,
                        msg.topic, peer)
            return REJECT
        self.counters["accepted"] += 1
        return ACCEPT

    def describe(self) -> str:
        if self.open:
            return "realm %s is OPEN: any peer may publish into it (give realm members " \
                   "to close it)" % self.name
        return "realm %s: %d member gateways may publish" % (self.name, len(self.members))


class Validators:
    """The realm validator, then per-topic validators (exact topic or prefix); the first
    result other than ACCEPT decides. Envelopes are decoded once here and kept (bounded)
    for the handler, keyed by the message's id."""

    def __init__(self, realm: Realm, *, keep: int = 4096) -> None:
        self.realm = realm
        self.exact: dict[str, list[Validator]] = {}
        self.prefixed: list[tuple[str, Validator]] = []
        self.decoded: OrderedDict[bytes, Envelope] = OrderedDict()
        self.keep = keep
        self.counters = {r: 0 for r in RESULTS}
        self.counters["bad_envelopes"] = 0
        self.counters["validator_errors"] = 0

    def add(self, topic: str, fn: Validator, *, prefix: bool = False) -> None:
        if prefix:
            self.prefixed.append((topic, fn))
        else:
            self.exact.setdefault(topic, []).append(fn)

    def validate(self, msg: GossipLike) -> str:
        if getattr(msg, "received_from", True) is None:
            return ACCEPT  # our own publish: we built the envelope, no need to check it
        result = self._run(msg)
        self.counters[result] += 1
        return result

    def _run(self, msg: GossipLike) -> str:
        r = self.realm.validate(msg)
        if r != ACCEPT:
            return r
        for fn in self.exact.get(msg.topic, ()):
            r = self._call(fn, msg)
            if r != ACCEPT:
                return r
        for p, fn in self.prefixed:
            if msg.topic.startswith(p):
                r = self._call(fn, msg)
                if r != ACCEPT:
                    return r
        return ACCEPT

    def _call(self, fn: Validator, msg: GossipLike) -> str:
        try:
            r = fn(msg)
        except Exception:  # a broken validator rejects, it does not crash
            self.counters["validator_errors"] += 1
            log.exception("validator failed on %s", msg.topic)
            return REJECT
        if r not in RESULTS:
            self.counters["validator_errors"] += 1
            log.warning("validator returned %r on %s; rejecting", r, msg.topic)
            return REJECT
        return r

    # ---- the envelope validators -------------------------------------------------------

    def envelope(self, msg: GossipLike) -> Envelope | None:
        """The decoded envelope of msg (decoded here once; None if malformed)."""
        mid = getattr(msg, "msg_id", None)
        key = bytes(mid) if isinstance(mid, bytes | bytearray) else None
        if key is not None:
            env = self.decoded.pop(key, None)
            if env is not None:
                return env
        try:
            env = Envelope.decode(msg.data)
        except EnvelopeError as e:
            self.counters["bad_envelopes"] += 1
            log.warning("bad envelope on %s from %s: %s", msg.topic, msg.from_peer, e)
            return None
        if key is not None:
            self.decoded[key] = env
            while len(self.decoded) > self.keep:
                self.decoded.popitem(last=False)
        return env

    def take(self, msg: GossipLike) -> Envelope | None:
        """The envelope the validator decoded for msg, removed from the cache."""
        return self.envelope(msg)

    def pub_validator(self, msg: GossipLike) -> str:
        """/<realm>/pub/<root>: a well-formed, undirected envelope whose board topic lies
        under <root>."""
        env = self._peek(msg)
        if env is None:
            return REJECT
        try:
            _, _, root = parse_gossip_topic(msg.topic)
        except RealmError:
            return REJECT
        if env.directed or (root != "*" and not under_root(env.topic, root)):
            log.warning("envelope for %s on gossip topic %s refused", env.topic, msg.topic)
            return REJECT
        return ACCEPT

    def to_validator(self, msg: GossipLike) -> str:
        """/<realm>/to/*: a directed envelope with a valid address, from the gateway its
        originator names."""
        from pubmote.gateway.mesh.directed import (
            DirectedAddressError,
            parse_address,
            parse_originator,
        )

        env = self._peek(msg)
        if env is None or env.address is None or env.originator is None:
            return REJECT
        try:
            parse_address(env.address)
            orig = parse_originator(env.originator)
        except DirectedAddressError as e:
            log.warning("directed envelope on %s refused: %s", msg.topic, e)
            return REJECT
        if orig.orch != env.gateway:
            log.warning("directed envelope by %s from gateway %s refused: not its originator",
                        env.originator, env.gateway)
            return REJECT
        return ACCEPT

    def _peek(self, msg: GossipLike) -> Envelope | None:
        env = self.envelope(msg)
        mid = getattr(msg, "msg_id", None)
        if env is not None and isinstance(mid, bytes | bytearray):
            self.decoded[bytes(mid)] = env  # put back for the handler
        return env
