"""The gateway mesh in an open realm: an outsider signing envelopes that claim another
gateway's name, with any epoch and sequence number (far ahead, far behind, the same as
the real one's, the largest a CBOR integer takes), cannot make a gateway drop that
gateway's real messages: an envelope moves only the window of the key that signed it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from e2e import wait_until
from pubmote.core.hub import Hub, Message
from pubmote.gateway.mesh.envelope import Envelope
from pubmote.gateway.mesh.relay import from_config
from pubmote.p2p import Host, KeyPair
from pubmote.p2p.pubsub.router import GossipSub

REALM = "adv"
PUB = "/adv/pub/*"
BIG = (1 << 63) - 1


def test_forged_envelopes_do_not_blind_a_gateway(tmp_path: Path) -> None:
    async def run() -> None:
        hubs = {g: Hub(gateway=g) for g in "AB"}
        got: list[Message] = []
        hubs["B"].add_listener(got.append)
        a = await from_config(hubs["A"], {
            "gateway": "A", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
            "mesh_key_file": str(tmp_path / "A.key")})
        b = await from_config(hubs["B"], {
            "gateway": "B", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
            "mesh_key_file": str(tmp_path / "B.key"),
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
            outsider = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
            async with outsider, GossipSub(outsider) as gs:
                gs.subscribe(PUB, lambda m: None)
                await outsider.connect(b.host.listen_addrs[0].with_p2p(str(b.host.peer_id)))
                await wait_until(lambda: len(gs.mesh_peers(PUB)) >= 1, 20, "outsider meshed")
                forged = [(BIG, BIG), (a.epoch + 10**9, 1), (a.epoch, BIG), (a.epoch, 4),
                          (a.epoch, 10**6), (a.epoch - 1, 10**6), (1, 1), (0, 1)]
                for epoch, seq in forged:
                    await gs.publish(PUB, Envelope(
                        topic="/site/forged", payload=b"forged", board="sp:1", gateway="A",
                        ts_ms=1, epoch=epoch, seq=seq).encode())
                await wait_until(lambda: b.counters["name_conflicts"] >= 1, 20,
                                 "the forgeries at B")
                # while the outsider is still there, and after: every real message arrives
                real(20)
                await wait_until(lambda: len(from_a()) == 23, 30, "A's 20 real messages")
            real(20)
            await wait_until(lambda: len(from_a()) == 43, 30, "20 more after it left")
            assert [m.topic for m in from_a()] == [b"/site/%d" % k for k in range(1, 44)]
            # A's own window saw every one of its messages once, in order
            mine = [v for k, v in b.tracker.origins().items() if str(a.host.peer_id) in k]
            assert [(v["received"], v["stale"], v["duplicates"]) for v in mine] == [(43, 0, 0)]
        finally:
            await b.close()
            await a.close()
            for h in hubs.values():
                await h.close()

    asyncio.run(asyncio.wait_for(run(), 120))
