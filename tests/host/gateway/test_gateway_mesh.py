"""Three bridges in one process joined by the gateway mesh (A - B - C in a line, so B
relays), with simulated boards on A and C: fan-out exactly once, realm outsiders
rejected, and every directed address form including loops and self-delivery."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import cbor2

from e2e import Collector, Publisher, boards_registered, bridge_with_boards, free_port, wait_until
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.mesh.envelope import MAX_PAYLOAD, Envelope
from pubmote.p2p import Host, KeyPair
from pubmote.p2p.pubsub.router import GossipSub

REALM = "t"
PUB = "/t/pub/*"
TO = "/t/to/*"


def key_file(path: Path) -> KeyPair:
    k = KeyPair.generate()
    path.write_bytes(k.encode_private())
    path.chmod(0o600)
    return k


def sp_urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


class Site:
    """One bridge with its SP subscriber and publisher."""

    def __init__(self, name: str, bridge: Bridge, urls: dict[str, list[str]]) -> None:
        self.name = name
        self.bridge = bridge
        self.sub = Collector(urls["sp_pub"][0], b"/test/", b"/pubmote/to/")
        self.pub = Publisher(urls["sp_sub"][0])

    @property
    def addr(self) -> str:
        h = self.bridge.mesh.host
        return str(h.listen_addrs[0].with_p2p(str(h.peer_id)))

    def directed(self) -> list[dict[str, Any]]:
        """Directed messages this gateway's applications received."""
        return [cbor2.loads(x.split(b"|", 1)[1]) for x in self.sub.with_prefix(b"/pubmote/to/")]

    def close(self) -> None:
        self.sub.close()
        self.pub.close()


@contextlib.asynccontextmanager
async def three_sites(tmp: Path, tool: KeyPair) -> AsyncIterator[dict[str, Site]]:
    keys = {g: key_file(tmp / ("%s.key" % g)) for g in "ABC"}
    members = [str(k.peer_id) for k in keys.values()] + [str(tool.peer_id)]
    sites: dict[str, Site] = {}
    async with contextlib.AsyncExitStack() as stack:
        prev: str | None = None
        for g, boards in (("A", 1), ("B", 0), ("C", 1)):
            (tmp / g).mkdir()
            urls = sp_urls()
            bridge = await stack.enter_async_context(bridge_with_boards(
                tmp / g, boards, app="mesh_app",
                extra={"tag": g, "watch": ["/test/A/sim1/seq"]},
                gateway=g, realm=REALM, realm_member=members,
                mesh_key_file=str(tmp / ("%s.key" % g)),
                mesh_listen=["/ip4/127.0.0.1/tcp/0"],
                mesh_peer=[prev] if prev else [], **urls))
            site = sites[g] = Site(g, bridge, urls)
            stack.callback(site.close)
            prev = site.addr
        await asyncio.gather(boards_registered(sites["A"].bridge, ["sim1"]),
                             boards_registered(sites["C"].bridge, ["sim1"]))

        def meshed() -> bool:
            gs = {g: s.bridge.mesh.gs for g, s in sites.items()}
            return all(len(gs[g].mesh_peers(t)) >= n for t in (PUB, TO)
                       for g, n in (("A", 1), ("B", 2), ("C", 1)))

        await wait_until(meshed, 15, "the gossip mesh A-B-C")
        await wait_until(lambda: all(any(c.ready for c in ep.conns)
                                     for s in sites.values() for ep in s.bridge.sp),
                         10, "SP clients")
        yield sites


async def command(site: Site, board: str, cmd: bytes) -> None:
    await site.pub.send(b"/test/%s/%s/ctl|" % (site.name.encode(), board.encode()) + cmd)


def board_dgot(site: Site, tag: str) -> list[list[bytes]]:
    """Directed messages board sim1 on gateway `tag` reported (seen by `site`)."""
    pre = b"/test/%s/sim1/dgot|" % tag.encode()
    return [x[len(pre):].split(b"|", 3) for x in site.sub.with_prefix(pre)]


def test_three_gateways(tmp_path: Path) -> None:
    async def run() -> None:
        tool = KeyPair.generate()
        async with three_sites(tmp_path, tool) as s:
            await fan_out_once(s)
            await directed_forms(s)
            await loops_and_outsiders(s, tool)

    asyncio.run(asyncio.wait_for(run(), 90))


async def fan_out_once(s: dict[str, Site]) -> None:
    n = 20
    for i in range(n):
        await command(s["A"], "sim1", b"pub:/test/A/sim1/seq|%d" % i)
        await asyncio.sleep(0.02)
    want = {b"/test/A/sim1/seq|%d" % i for i in range(n)}
    # an SP subscriber on B (one hop) and on C (two hops), and the board on C
    for g in "BC":
        await s[g].sub.wait_for(b"/test/A/sim1/seq|", n, 20)
    got_c = b"/test/C/sim1/got|"
    await s["B"].sub.wait_for(got_c, n, 20)
    await asyncio.sleep(1.0)  # anything duplicated would have arrived by now
    for g in "ABC":
        lines = s[g].sub.with_prefix(b"/test/A/sim1/seq|")
        assert sorted(lines) == sorted(want), g  # exactly once each
    board_c = [x[len(got_c):] for x in s["B"].sub.with_prefix(got_c)]
    assert sorted(board_c) == sorted(want)
    for g in "ABC":
        st = s[g].bridge.mesh.stats()
        assert st["tracker"]["lost"] == 0 and st["in_duplicates"] == 0, st
    assert s["B"].bridge.mesh.counters["in"] >= n


# (sender, address, receivers): "X" = the applications of gateway X, "X/sim1" = that board
CASES = [
    ("A/sim1", "/C/sim1", {"C/sim1"}),
    ("A/sim1", "/C", {"C"}),
    ("A/sim1", "/C/*", {"C", "C/sim1"}),
    ("A/sim1", "/*", {"A", "B", "C"}),
    ("A/sim1", "/*/*", {"A", "B", "C", "A/sim1", "C/sim1"}),  # A/sim1: its own copy
    ("A/sim1", "/A/sim1", {"A/sim1"}),                         # to itself: never leaves
    ("A/sim1", "/A/*", {"A", "A/sim1"}),
    ("A", "/A", {"A"}),                                        # a gateway's own copy
    ("A", "/*", {"A", "B", "C"}),
    ("A", "/*/*", {"A", "B", "C", "A/sim1", "C/sim1"}),
    ("A", "/C/sim1", {"C/sim1"}),
    ("C/sim1", "/A/sim1", {"A/sim1"}),
    ("C/sim1", "/B", {"B"}),
    ("B", "/A/*", {"A", "A/sim1"}),
    ("A", "/C/nosuch", set()),
]


async def directed_forms(s: dict[str, Site]) -> None:
    for i, (sender, address, _) in enumerate(CASES):
        body = b"case%d" % i
        if "/" in sender:
            g, board = sender.split("/")
            await command(s[g], board, b"send:%s|/cmd/x|%s" % (address.encode(), body))
        else:
            await s[sender].pub.send(b"/pubmote/to%s|/cmd/x|%s" % (address.encode(), body))
        await asyncio.sleep(0.05)

    def received() -> dict[bytes, list[tuple[str, str, str]]]:
        """body -> [(receiver, address, originator)]"""
        out: dict[bytes, list[tuple[str, str, str]]] = {}
        for g in "ABC":
            for m in s[g].directed():
                out.setdefault(m["p"], []).append((g, m["a"], m["o"]))
        for g in "AC":
            for addr, orig, _topic, body in board_dgot(s["B"], g):
                out.setdefault(body, []).append((g + "/sim1", addr.decode(), orig.decode()))
        return out

    total = sum(len(r) for _, _, r in CASES)
    await wait_until(lambda: sum(len(v) for v in received().values()) >= total, 30,
                     "every directed message")
    await asyncio.sleep(1.5)  # and nothing more
    got = received()
    for i, (sender, address, want) in enumerate(CASES):
        rows = got.get(b"case%d" % i, [])
        assert sorted(r for r, _, _ in rows) == sorted(want), (sender, address, rows)
        originator = "/" + sender
        assert all(a == address and o == originator for _, a, o in rows), rows
    c = s["C"].bridge.mesh.counters
    assert c["directed_unknown_board"] == 1
    assert s["A"].bridge.mesh.counters["directed_out"] >= 8


async def loops_and_outsiders(s: dict[str, Site], tool: KeyPair) -> None:
    """A member peer that sends A's directed message back to A (a loop); an outsider that
    publishes into the realm."""
    outsider = KeyPair.generate()
    for k in (tool, outsider):
        host = Host(k, listen_addrs=["/ip4/127.0.0.1/tcp/0"])
        async with host, GossipSub(host) as gs:
            gs.subscribe(PUB, lambda m: None)
            gs.subscribe(TO, lambda m: None)
            await host.connect(s["B"].addr)
            await wait_until(lambda gs=gs: len(gs.mesh_peers(PUB)) >= 1, 10, "a mesh with B")
            tag = "tool" if k is tool else "outsider"
            await gs.publish(PUB, Envelope(topic="/test/%s/x" % tag, payload=b"hi", board="x",
                                           gateway=tag, ts_ms=1, epoch=1, seq=1).encode())
            # as if A had sent it (A's epoch, a sequence number far beyond any A has used)
            a = s["A"].bridge.mesh
            await gs.publish(TO, Envelope(topic="/cmd/x", payload=b"loop-%s" % tag.encode(),
                                          board="sim1", gateway="A", ts_ms=1, epoch=a.epoch,
                                          seq=1_000_000 + len(tag),
                                          address="/*", originator="/A/sim1").encode())
            await asyncio.sleep(1.0)
    # the member's plain message arrives everywhere; the outsider's nowhere
    for g in "ABC":
        await s[g].sub.wait_for(b"/test/tool/x|hi", 1, 10)
        assert not s[g].sub.with_prefix(b"/test/outsider/")
    assert s["B"].bridge.mesh.realm.counters["outsiders"] >= 1
    # the looped directed message: A drops it (and counts it); B and C deliver the member's
    assert s["A"].bridge.mesh.counters["directed_loops"] == 1
    assert not [m for m in s["A"].directed() if m["p"].startswith(b"loop-")]
    for g in "BC":
        bodies = [m["p"] for m in s[g].directed()]
        assert b"loop-tool" in bodies and b"loop-outsider" not in bodies


def test_gaps_duplicates_and_no_echo(tmp_path: Path) -> None:
    """Two bare hubs (no boards): gaps counted in the hub's counters, an envelope another
    peer signs in A's name kept out of A's window (a name conflict, counted), messages from
    the mesh never sent back into it."""
    from pubmote.core.hub import Hub, Message
    from pubmote.gateway.mesh.relay import from_config

    async def run() -> None:
        hubs = {g: Hub(gateway=g) for g in "AB"}
        got: list[Message] = []
        hubs["B"].add_listener(got.append)
        # A's out queue holds 5 envelopes: a burst of 6 drops one there
        cfg_a = {"gateway": "A", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
                 "mesh_key_file": str(tmp_path / "A.key"), "mesh_out_queue": 5}
        a = await from_config(hubs["A"], cfg_a)
        b = await from_config(hubs["B"], {
            "gateway": "B", "realm": REALM, "mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
            "mesh_key_file": str(tmp_path / "B.key"),
            "mesh_peer": [str(a.host.listen_addrs[0].with_p2p(str(a.host.peer_id)))]})
        try:
            await wait_until(lambda: a.gs.mesh_peers(PUB) and b.gs.mesh_peers(PUB), 10, "mesh")

            def send(n: int, payload: bytes = b"") -> None:
                # the first with a taken-time (docs/protocols/event-time.md), the rest without
                hubs["A"].publish(Message(b"/x/%d" % n, payload or b"p%d" % n, "sp:1", "sp-sub",
                                          t_taken=1_700_000_000_000 if n == 0 else None))

            for n in range(5):
                send(n)
            await wait_until(lambda: len(got) == 5, 10, "5 messages at B")
            assert [m.ingress for m in got] == ["mesh"] * 5
            assert got[0].origin == "A/sp:1" and got[0].topic == b"/x/0"
            assert got[0].t_taken == 1_700_000_000_000 and got[1].t_taken is None
            # two envelopes A cannot send (over the envelope's size limit): their sequence
            # numbers are taken all the same, so B sees them missing
            send(5, bytes(MAX_PAYLOAD + 1))
            send(6, bytes(MAX_PAYLOAD + 1))
            assert a.counters["out_failed"] == 2
            # a burst of 6 while the router has not run: 5 queued, the last dropped at A's
            # own queue (counted there)
            for n in range(7, 13):
                send(n)
            assert a.counters["out_dropped"] == 1
            await wait_until(lambda: len(got) == 10, 10, "the burst's 5 at B")
            send(13)
            await wait_until(lambda: len(got) == 11, 10, "the message after the gap")
            assert [m.topic for m in got[5:]] == [b"/x/%d" % n for n in (7, 8, 9, 10, 11, 13)]
            assert hubs["B"].counters["mesh_gaps"] == 3 and hubs["B"].counters["mesh_lost"] == 3
            # another peer replays A's last envelope under its own key: in an open realm anyone
            # may publish, but only into its own window: A's next message still arrives
            host = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
            async with host, GossipSub(host) as gs:
                gs.subscribe(PUB, lambda m: None)
                await host.connect(b.host.listen_addrs[0].with_p2p(str(b.host.peer_id)))
                await wait_until(lambda: len(gs.mesh_peers(PUB)) >= 1, 10, "a mesh with B")
                # A's last envelope was its 14th (5, 2 unsendable, 6 of the burst, 1)
                await gs.publish(PUB, Envelope(topic="/x/13", payload=b"p13", board="sp:1",
                                               gateway="A", ts_ms=1, epoch=a.epoch,
                                               seq=14).encode())
                await wait_until(lambda: b.counters["name_conflicts"] == 1, 10, "the replay")
            await wait_until(lambda: len(got) == 12, 10, "the replay, as that peer's")
            send(14)
            await wait_until(lambda: len(got) == 13, 10, "A's next message")
            assert got[-1].topic == b"/x/14" and b.counters["in_duplicates"] == 0
            # B relayed the mesh's messages and sent none back into it
            assert b.counters["out"] == 0 and b.gs.counters["published"] == 0
            # the replay reached A too: its own message, dropped and counted
            await wait_until(lambda: a.counters["loops"] == 1, 10, "the replay at A")
            assert a.counters["in"] == 0
        finally:
            await b.close()
            await a.close()
            for h in hubs.values():
                await h.close()

    asyncio.run(asyncio.wait_for(run(), 40))


def test_bridge_cli_mesh_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    def bridge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pubmote", "bridge",
                               "--no-view", "--sp-pub", "none", "--sp-sub", "none",
                               "--mesh-key-file", str(tmp_path / "k"), *args],
                              capture_output=True, text=True, timeout=30)

    p = bridge("--mesh-peer", "/ip4/127.0.0.1/tcp/1")
    assert p.returncode == 2 and "/p2p/PEERID" in p.stderr
    p = bridge("--mesh-listen", "/ip4/127.0.0.1/tcp/0", "--realm", "a/b")
    assert p.returncode == 2 and "--realm" in p.stderr and p.stderr.count("\n") == 1
    p = bridge("--mesh-listen", "/ip4/127.0.0.1/tcp/0", "--realm-member", "nonsense")
    assert p.returncode == 2 and "--realm-member" in p.stderr and "nonsense" in p.stderr
    p = bridge("--mesh-listen", "/ip4/127.0.0.1/tcp/0", "--name", "*")
    assert p.returncode == 2 and "--name" in p.stderr and "addresses" in p.stderr
    help_text = subprocess.run([sys.executable, "-m", "pubmote", "bridge", "--help"],
                               capture_output=True, text=True, timeout=30).stdout
    for flag in ("--mesh-listen", "--mesh-peer", "--realm", "--name", "--realm-member",
                 "--mesh-key-file", "--mesh-topic"):
        assert flag in help_text
