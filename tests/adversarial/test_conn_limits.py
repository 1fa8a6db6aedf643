"""Connections a peer opens and holds: on every listener (SP PUB and SUB, the board TCP and
UDP faces, the NDN face, the mesh) the bridge holds at most its caps, per listener and
per source address, and cuts off the peers that never finish a handshake, never register
a board or go quiet. Attackers come from other loopback addresses than the genuine peers;
through every attack a genuine simulated board is served (its readings reach an SP
subscriber, a command published to it through SP reaches it), and again within 10 s of
the attackers leaving. Caps are set low in each test to keep the attacks small."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from attackers import ATTACKERS, Genuine, Peer, alive, close_all, open_conns, registration

from e2e import boards_registered, bridge_with_boards, free_port, sp_connected, wait_until
from pubmote.boards.sim import SimBoard
from pubmote_wire import framing

RECOVERY_S = 10.0


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 120) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout_s))


def _sp_urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_sp_connections_are_capped_and_silent_peers_cut_off(tmp_path: Path) -> None:
    """300 connections to each SP endpoint from two addresses that never send their SP
    header, then a wave from four more: each endpoint holds at most its caps, and lets go
    of the silent ones after the handshake timeout."""
    async def body() -> None:
        urls = _sp_urls()
        caps = {"sp_max_conns": 40, "sp_max_conns_per_ip": 12, "sp_handshake_timeout_s": 1.5}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls, **caps) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            peers: list[Peer] = []
            try:
                await sp_connected(bridge)
                await g.served(20)
                for url in (urls["sp_pub"][0], urls["sp_sub"][0]):
                    peers += await open_conns(_port(url), ATTACKERS[:2], 150)
                held = [ep.clients() for ep in bridge.sp]
                assert max(held) <= 1 + 2 * 12, held  # the genuine client, 12 per address
                await g.served()
                for url in (urls["sp_pub"][0], urls["sp_sub"][0]):
                    peers += await open_conns(_port(url), ATTACKERS[2:6], 12)
                held = [ep.clients() for ep in bridge.sp]
                assert max(held) <= 40, held
                await g.served()
                # nobody leaves: the bridge cuts the silent ones off by itself
                await wait_until(lambda: alive(peers) == 0, 10,
                                 "the silent SP peers to be cut off")
                assert [ep.clients() for ep in bridge.sp] == [1, 1]
                close_all(peers)
                await g.recovered("SP connection flood")
            finally:
                close_all(peers)
                g.close()
            hits = bridge.hits.counts
            assert hits["sp_max_conns_per_ip"] >= 2 * 2 * (150 - 12)
            assert hits["sp_max_conns"] > 0 and hits["sp_handshake_timeout_s"] >= 40
            assert "sp_max_conns_per_ip" in bridge.status()

    run(body)


def test_board_tcp_connections_capped_and_silent_ones_closed(tmp_path: Path) -> None:
    """On the board TCP face: connections that say nothing, that send garbage, that
    register a fake board then go quiet, from one address and from many: at most the caps
    are held, and every one of them is closed by the register or idle timeout."""
    async def body() -> None:
        urls = _sp_urls()
        port = free_port()
        caps = {"tcp": ["127.0.0.1:%d" % port], "tcp_max_conns": 40, "tcp_max_conns_per_ip": 8,
                "board_register_timeout_s": 1.5, "board_idle_timeout_s": 4.0}
        extra = {"link": "tcp", "host": "127.0.0.1", "port": port}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, extra=extra, **urls,
                                      **caps) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            peers: list[Peer] = []

            def tcp_faces() -> int:
                return sum(1 for f in bridge.faces if f.kind == "tcp")

            try:
                await sp_connected(bridge)
                await g.served(20)
                garbage = framing.encode(os.urandom(40)) + os.urandom(200)
                peers += await open_conns(port, ATTACKERS[:1], 100)  # silent
                peers += await open_conns(port, ATTACKERS[1:2], 100, garbage)
                for i, p in enumerate(await open_conns(port, ATTACKERS[2:3], 8)):
                    p.write(registration("fake%d" % i))  # a board, then silence
                    peers.append(p)
                assert tcp_faces() <= 1 + 3 * 8, tcp_faces()
                await g.served()
                peers += await open_conns(port, ATTACKERS[3:9], 8)  # six more addresses
                assert tcp_faces() <= 40, tcp_faces()
                await g.served()
                await wait_until(lambda: alive(peers) == 0, 15,
                                 "the silent board connections to be closed")
                await wait_until(lambda: tcp_faces() == 1, 30, "only the genuine board's face")
                close_all(peers)
                await g.recovered("board TCP connection flood")
            finally:
                close_all(peers)
                g.close()
            hits = bridge.hits.counts
            assert hits["tcp_max_conns_per_ip"] >= 2 * (100 - 8) and hits["tcp_max_conns"] > 0
            assert hits["board_register_timeout_s"] > 0 and hits["board_idle_timeout_s"] >= 8
            assert bridge.hub.board("sim1").up

    run(body)


def test_udp_address_slots_are_capped_and_given_back(tmp_path: Path) -> None:
    """320 source addresses on the UDP face (40 ports on each of 8 addresses), some
    registering fake boards: at most the caps get a face, the slots come back when those
    faces never register or go quiet, and a new UDP board is then answered."""
    async def body() -> None:
        urls = _sp_urls()
        port = free_port()
        caps = {"udp": ["127.0.0.1:%d" % port], "udp_max_boards": 32,
                "udp_max_boards_per_ip": 8, "board_register_timeout_s": 1.5,
                "board_idle_timeout_s": 4.0}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls, **caps) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            socks: list[socket.socket] = []
            late = SimBoard("sim9", tmp_path, period_ms=200,
                            extra={"link": "udp", "host": "127.0.0.1", "port": port})
            udp = bridge.udp[0]
            try:
                await sp_connected(bridge)
                await g.served(20)
                for k, src in enumerate(ATTACKERS[:8]):
                    for i in range(40):
                        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        s.bind((src, 0))
                        s.setblocking(False)
                        fake = registration("udpfake%d_%d" % (k, i)) if k < 2 else b"\x00junk"
                        s.sendto(fake, ("127.0.0.1", port))
                        socks.append(s)
                    await asyncio.sleep(0.01)  # the listener reads between batches
                await wait_until(lambda: udp.refused > 0, 30, "the flood to reach the caps")
                assert len(udp.faces) <= 32, len(udp.faces)
                await g.served()
                late.start()  # a new UDP board, while the attackers hold their slots
                await boards_registered(bridge, ["sim9"], timeout_s=RECOVERY_S)
                assert bridge.hub.board("sim9").face_kind == "udp"
                await Genuine(bridge, "sim9").served(RECOVERY_S)
                await wait_until(lambda: len(udp.faces) == 1, 10,
                                 "the attackers' address slots to come back")
                await g.recovered("UDP address flood")
            finally:
                late.stop()
                for s in socks:
                    s.close()
                g.close()
            hits = bridge.hits.counts
            assert hits["udp_max_boards_per_ip"] > 0 and hits["udp_max_boards"] > 0
            assert hits["board_register_timeout_s"] > 0 and hits["board_idle_timeout_s"] > 0

    run(body)


def test_ndn_face_caps_per_address(tmp_path: Path) -> None:
    """100 idle app connections to the NDN face from one address, then 8 from each of
    six more: at most the caps are held, and a genuine local app still gets in."""
    async def body() -> None:
        urls = _sp_urls()
        port = free_port()
        caps = {"ndn_face": ["tcp://127.0.0.1:%d" % port], "ndn_max_apps": 24,
                "ndn_max_apps_per_ip": 6}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls, **caps) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            peers: list[Peer] = []
            ndn = bridge.ndn[0]
            try:
                await sp_connected(bridge)
                await g.served(20)
                peers += await open_conns(port, ATTACKERS[:1], 100)
                assert len(ndn.faces) <= 6, len(ndn.faces)
                app = await open_conns(port, ["127.0.0.1"], 1)
                await wait_until(lambda: len(ndn.faces) == 7, 30, "the genuine app's face")
                peers += await open_conns(port, ATTACKERS[1:7], 8)
                assert len(ndn.faces) <= 24, len(ndn.faces)
                assert alive(app) == 1
                await g.served()
                close_all(peers)
                await wait_until(lambda: len(ndn.faces) == 1, 30, "the attackers' faces gone")
                await g.recovered("NDN face connection flood")
                close_all(app)
            finally:
                close_all(peers)
                g.close()
            hits = bridge.hits.counts
            assert hits["ndn_max_apps_per_ip"] >= 100 - 6 and hits["ndn_max_apps"] > 0

    run(body)


def test_mesh_inbound_caps_per_address(tmp_path: Path) -> None:
    """32 idle TCP connections to the mesh listener from one address, and 12 peers that
    complete the handshake from another: genuine gateways dialling from a third address
    get in every time (10 of 10), the idle ones are cut off at the handshake timeout, and
    one address keeps at most its share of connections."""
    async def body() -> None:
        from pubmote.p2p import Host, KeyPair
        from pubmote.p2p.multistream import select
        from pubmote.p2p.noise import PROTOCOL_ID as NOISE
        from pubmote.p2p.noise import secure_outbound
        from pubmote.p2p.transport import RawConn
        from pubmote.p2p.yamux import PROTOCOL_ID as YAMUX

        urls = _sp_urls()
        caps: dict[str, Any] = {"mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
                                "mesh_key_file": str(tmp_path / "gw.key"),
                                "mesh_handshake_timeout_s": 2.0, "mesh_max_inbound_per_ip": 8}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls, **caps) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            host = bridge.mesh.host
            ma = host.listen_addrs[0]
            port = int(ma.tcp_host_port()[1])
            target = ma.with_p2p(str(host.peer_id))
            peers: list[Peer] = []
            secured: list[RawConn] = []
            try:
                await sp_connected(bridge)
                await g.served(20)
                peers = await open_conns(port, ATTACKERS[:1], 32)
                for _ in range(12):  # peers that do complete Noise, from one address
                    try:
                        r, w = await asyncio.open_connection("127.0.0.1", port,
                                                             local_addr=(ATTACKERS[1], 0))
                        raw = RawConn(r, w)
                        secured.append(raw)
                        await asyncio.wait_for(select(raw, [NOISE]), 3)
                        sec = await asyncio.wait_for(
                            secure_outbound(raw, KeyPair.generate(), host.peer_id), 3)
                        await asyncio.wait_for(select(sec, [YAMUX]), 3)
                    except (OSError, TimeoutError, EOFError, asyncio.IncompleteReadError,
                            ConnectionError) as e:
                        print("attacker handshake refused: %r" % e)
                await wait_until(lambda: host.limit_hits["max_inbound_per_ip"] > 0, 30,
                                 "the per-address cap to turn the attackers away")
                from_b = [c for c in host.connections.connections()
                          if "/%s/" % ATTACKERS[1] in str(c.remote_addr)]
                assert len(from_b) <= 8, len(from_b)
                ok = 0
                for _ in range(10):  # ten genuine gateways, each a new peer
                    async with Host(KeyPair.generate()) as peer:
                        try:
                            conn = await peer.connect(target, timeout_s=5)
                            await conn.close()
                            ok += 1
                        except Exception as e:  # noqa: BLE001 - counted, shown
                            print("genuine dial failed: %r" % e)
                assert ok == 10, "%d of 10 genuine dials got in" % ok
                await g.served()
                await wait_until(lambda: alive(peers) == 0, 10,
                                 "the idle mesh connections to be cut off")
                close_all(peers)
                for raw in secured:
                    raw.abort()
                await g.recovered("mesh connection flood")
            finally:
                close_all(peers)
                for raw in secured:
                    raw.abort()
                g.close()
            status = bridge.status()
            assert "mesh_max_inbound_per_ip" in status and "mesh_handshake_timeout_s" in status

    run(body)
