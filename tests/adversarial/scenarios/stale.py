"""Attacks and faults on what a gateway believes is current: an outsider in an open realm
signing envelopes that claim another gateway's name (any epoch, any sequence number),
and a board that reboots and must be handed its retained last value again. Both run on
hubs in this process (no simulated board): the figures are what arrived and when."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hub_face import StubFace
from measure import Bound, Measure

from e2e import wait_until
from pubmote.core.hub import Hub, Message
from pubmote.dht import bep44
from pubmote.gateway.config import load_config
from pubmote.gateway.mesh.envelope import Envelope
from pubmote.gateway.mesh.relay import from_config
from pubmote.gateway.retained import RetainedTopics
from pubmote.p2p import Host, KeyPair
from pubmote.p2p.pubsub.router import GossipSub
from pubmote_wire import control

from .common import scaled

REALM = "adv"
PUB = "/adv/pub/*"
BIG = (1 << 63) - 1
TOPIC = b"/site/temp"


async def mesh_forgery(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """Gateways A and B meshed; an outsider publishes envelopes signed with its own key
    claiming A's name, with epochs and sequence numbers far ahead, far behind, equal to
    A's and the largest a CBOR integer takes; A publishes meanwhile and after the
    outsider left. The recovery: from the outsider leaving to A's next 20 at B."""
    m = Measure()
    m.bound = Bound(load_config(None, {})).mesh()
    rounds = scaled(1, scale)
    hubs = {g: Hub(gateway=g) for g in "AB"}
    got: list[Message] = []
    hubs["B"].add_listener(got.append)
    a = await from_config(hubs["A"], {
        "gateway": "A", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
        "mesh_key_file": str(tmp / "A.key")})
    b = await from_config(hubs["B"], {
        "gateway": "B", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
        "mesh_key_file": str(tmp / "B.key"),
        "mesh_peer": [str(a.host.listen_addrs[0].with_p2p(str(a.host.peer_id)))]})
    n = 0

    def real(k: int) -> None:
        nonlocal n
        for _ in range(k):
            n += 1
            hubs["A"].publish(Message(b"/site/%d" % n, b"real", "sp:1", "sp-sub"))

    def from_a() -> list[Message]:
        return [m for m in got if m.payload == b"real"]

    try:
        await wait_until(lambda: a.gs.mesh_peers(PUB) and b.gs.mesh_peers(PUB), 20,
                         "A and B meshed")
        real(3)
        await wait_until(lambda: len(from_a()) == 3, 20, "A's first messages at B")
        m.before()
        outsider = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
        async with outsider, GossipSub(outsider) as gs:
            gs.subscribe(PUB, lambda msg: None)
            await outsider.connect(b.host.listen_addrs[0].with_p2p(str(b.host.peer_id)))
            await wait_until(lambda: len(gs.mesh_peers(PUB)) >= 1, 20, "outsider meshed")
            forged = [(BIG, BIG), (a.epoch + 10**9, 1), (a.epoch, BIG), (a.epoch, 4),
                      (a.epoch, 10**6), (a.epoch - 1, 10**6), (1, 1), (0, 1)]
            for r in range(rounds):  # each round a step further (back, from the largest)
                for epoch, seq in forged:
                    await gs.publish(PUB, Envelope(
                        topic="/site/forged", payload=b"forged", board="sp:1", gateway="A",
                        ts_ms=1, epoch=epoch, seq=seq + r if seq + r <= BIG else seq - r
                    ).encode())
            await wait_until(lambda: b.counters["name_conflicts"] >= 1, 20,
                             "the forgeries at B")
            # while the outsider is still there, and after: every real message arrives
            real(20)
            await wait_until(lambda: len(from_a()) == 23, 30, "A's 20 real messages")
        m.sample()
        t0 = time.monotonic()
        real(20)
        await wait_until(lambda: len(from_a()) == 43, 30, "20 more after it left")
        m.recovered(time.monotonic() - t0)
        m.sample()
        # A's own window saw every one of its messages once, in order
        mine = [v for k, v in b.tracker.origins().items() if str(a.host.peer_id) in k]
        return m.figures(
            topics=[msg.topic.decode() for msg in from_a()],
            a_window=[(v["received"], v["stale"], v["duplicates"]) for v in mine],
            name_conflicts=b.counters["name_conflicts"], forged=rounds * len(forged))
    finally:
        await b.close()
        await a.close()
        for h in hubs.values():
            await h.close()


def _register(hub: Hub, face: StubFace, board: str, boot: int | None) -> None:
    params = control.register_params(board, "/pubmote/node/" + board, [b"/site/"], [],
                                     False, boot, None)
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, board.encode(), params, -1, 1500, None, None, None)
    hub.on_packet(face, bytes(buf[:n]))


def _handed(hub: Hub, board: str) -> int:
    """How many times the retained value was queued for the board (its outbox holds what
    the StubFace never fetches)."""
    b = hub.boards.get(board)
    return 0 if b is None else sum(1 for m in b.outbox if m.topic == TOPIC)


async def retained_reboot(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """A board registers, keeps alive, restarts on the same face, moves face, restarts
    there, comes back: handed its retained value at each start-up and only then (the
    same six steps at any scale). The recovery: the longest a restarted board waited
    for its value."""
    m = Measure()
    m.bound = Bound(load_config(None, {})).boards()
    hub = Hub()
    rt = RetainedTopics(hub, [TOPIC.decode()], key=bep44.KeyPair.generate(),
                        host="127.0.0.1", query_timeout_s=0.3)
    await rt.start()
    try:
        hub.publish(Message(TOPIC, b"21.5", "b0", "serial"))
        await wait_until(lambda: rt.last(TOPIC) is not None, 20, "the retained value")
        m.before()
        face, other = StubFace(1), StubFace(2)
        cases: list[tuple[StubFace, int | None, int]] = [
            (face, 7, 1),    # first registration: handed
            (face, 7, 1),    # keepalive, same start-up: not again
            (face, 8, 2),    # restarted on the same face: handed again
            (other, 8, 2),   # moved to another face, same start-up: it has it
            (other, 9, 3),   # restarted on that face: again
            (face, 9, 3),    # back on the first face, same start-up: not again
        ]
        handed = []
        for f, boot, want in cases:
            before = _handed(hub, "b1")
            t0 = time.monotonic()
            _register(hub, f, "b1", boot)
            if want > before:
                m.recovered(time.monotonic() - t0)
            handed.append((f.face_id, boot, _handed(hub, "b1"), want))
        # a board that sends no start-up number is known by its face
        _register(hub, face, "b2", None)
        _register(hub, face, "b2", None)
        b2_same_face = _handed(hub, "b2")
        _register(hub, other, "b2", None)
        m.sample()
        return m.figures(handed=handed, b2=[b2_same_face, _handed(hub, "b2")],
                         given_to_boards=rt.counters["given_to_boards"])
    finally:
        await rt.close()
        await hub.close()
