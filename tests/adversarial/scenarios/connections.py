"""Connections a peer opens and holds, on every listener (SP PUB and SUB, the board TCP
and UDP faces, the NDN face, the mesh): attackers from other loopback addresses than the
genuine peers, caps set low to keep the attacks small. Each returns the figures the
tests check: what the bridge held, what it counted, how soon the genuine board was
served again."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from attackers import (
    ATTACKERS,
    Genuine,
    Peer,
    alive,
    close_all,
    genuine_bridge,
    open_conns,
    registration,
)
from measure import RECOVERY_S, Bound, Measure

from e2e import boards_registered, free_port, wait_until
from pubmote.boards.sim import SimBoard
from pubmote_wire import framing

from .common import port_of, scaled


async def sp_conn_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """150 connections to each SP endpoint from each of two addresses that never send
    their SP header, then a wave from four more: each endpoint holds at most its caps,
    and lets go of the silent ones after the handshake timeout."""
    m = Measure()
    per_address = scaled(150, scale)
    caps = {"sp_max_conns": 40, "sp_max_conns_per_ip": 12, "sp_handshake_timeout_s": 1.5}
    peers: list[Peer] = []
    async with genuine_bridge(tmp, m, **caps) as (bridge, g):
        m.bound = Bound(bridge.cfg).sp_pub().sp_sub()
        urls = [bridge.cfg["sp_pub"][0], bridge.cfg["sp_sub"][0]]
        try:
            for url in urls:
                peers += await open_conns(port_of(url), ATTACKERS[:2], per_address)
            first = [ep.clients() for ep in bridge.sp]
            await g.served()
            for url in urls:
                peers += await open_conns(port_of(url), ATTACKERS[2:6], 12)
            second = [ep.clients() for ep in bridge.sp]
            await g.served()
            # nobody leaves: the bridge cuts the silent ones off by itself
            await wait_until(lambda: alive(peers) == 0, 10, "the silent SP peers to be cut off")
            m.sample()
            after_timeout = [ep.clients() for ep in bridge.sp]
            close_all(peers)
            await g.recovered("SP connection flood", measure=m)
            status = bridge.status()
        finally:
            close_all(peers)
    return m.figures(per_address=per_address, held_first_wave=first, held_second_wave=second,
                     held_after_timeout=after_timeout, hits=dict(bridge.hits.counts),
                     status=status)


async def tcp_idle_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """On the board TCP face: connections that say nothing, that send garbage, that
    register a fake board then go quiet, from one address and from many: at most the
    caps are held, and every one is closed by the register or idle timeout."""
    m = Measure()
    per_address = scaled(100, scale)
    port = free_port()
    caps = {"tcp": ["127.0.0.1:%d" % port], "tcp_max_conns": 40, "tcp_max_conns_per_ip": 8,
            "board_register_timeout_s": 1.5, "board_idle_timeout_s": 4.0,
            "extra": {"link": "tcp", "host": "127.0.0.1", "port": port}}  # the genuine one too
    peers: list[Peer] = []
    async with genuine_bridge(tmp, m, **caps) as (bridge, g):
        m.bound = Bound(bridge.cfg).tcp().boards()

        def tcp_faces() -> int:
            return sum(1 for f in bridge.faces if f.kind == "tcp")

        try:
            garbage = framing.encode(os.urandom(40)) + os.urandom(200)
            peers += await open_conns(port, ATTACKERS[:1], per_address)  # silent
            peers += await open_conns(port, ATTACKERS[1:2], per_address, garbage)
            for i, p in enumerate(await open_conns(port, ATTACKERS[2:3], 8)):
                p.write(registration("fake%d" % i))  # a board, then silence
                peers.append(p)
            first = tcp_faces()
            await g.served()
            peers += await open_conns(port, ATTACKERS[3:9], 8)  # six more addresses
            second = tcp_faces()
            await g.served()
            await wait_until(lambda: alive(peers) == 0, 15,
                             "the silent board connections to be closed")
            await wait_until(lambda: tcp_faces() == 1, 30, "only the genuine board's face")
            m.sample()
            close_all(peers)
            await g.recovered("board TCP connection flood", measure=m)
            genuine_up = bridge.hub.board("sim1").up
        finally:
            close_all(peers)
    return m.figures(per_address=per_address, faces_first_wave=first, faces_second_wave=second,
                     hits=dict(bridge.hits.counts), genuine_up=genuine_up)


async def udp_slot_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """40 ports on each of 8 addresses on the UDP face, some registering fake boards: at
    most the caps get a face, the slots come back when those faces never register or go
    quiet, and a new UDP board is answered meanwhile."""
    m = Measure()
    per_address = scaled(40, scale)
    port = free_port()
    caps = {"udp": ["127.0.0.1:%d" % port], "udp_max_boards": 32, "udp_max_boards_per_ip": 8,
            "board_register_timeout_s": 1.5, "board_idle_timeout_s": 4.0}
    socks: list[socket.socket] = []
    late = SimBoard("sim9", tmp, period_ms=200,
                    extra={"link": "udp", "host": "127.0.0.1", "port": port})
    async with genuine_bridge(tmp, m, **caps) as (bridge, g):
        m.bound = Bound(bridge.cfg).udp().boards()
        udp = bridge.udp[0]
        late_g = None
        try:
            for k, src in enumerate(ATTACKERS[:8]):
                for i in range(per_address):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    socks.append(s)
                    s.bind((src, 0))
                    s.setblocking(False)
                    fake = registration("udpfake%d_%d" % (k, i)) if k < 2 else b"\x00junk"
                    s.sendto(fake, ("127.0.0.1", port))
                    if i % 40 == 39:
                        await asyncio.sleep(0.01)  # the listener reads between batches
            await wait_until(lambda: udp.refused > 0, 30, "the flood to reach the caps")
            faces = len(udp.faces)
            await g.served()
            late.start()  # a new UDP board, while the attackers hold their slots
            await boards_registered(bridge, ["sim9"], timeout_s=RECOVERY_S)
            late_kind = bridge.hub.board("sim9").face_kind
            late_g = Genuine(bridge, "sim9")
            late_served_s = await late_g.served(RECOVERY_S)
            await wait_until(lambda: len(udp.faces) == 1, 10,
                             "the attackers' address slots to come back")
            m.sample()
            await g.recovered("UDP address flood", measure=m)
        finally:
            late.stop()
            for s in socks:
                s.close()
            if late_g is not None:
                late_g.close()
    return m.figures(per_address=per_address, faces_under_attack=faces, late_kind=late_kind,
                     late_served_s=round(late_served_s, 2), hits=dict(bridge.hits.counts))


async def ndn_conn_flood(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """Idle app connections to the NDN face from one address, then 8 from each of six
    more: at most the caps are held, and a genuine local app still gets in."""
    m = Measure()
    per_address = scaled(100, scale)
    port = free_port()
    caps = {"ndn_face": ["tcp://127.0.0.1:%d" % port], "ndn_max_apps": 24,
            "ndn_max_apps_per_ip": 6}
    peers: list[Peer] = []
    app: list[Peer] = []
    async with genuine_bridge(tmp, m, **caps) as (bridge, g):
        m.bound = Bound(bridge.cfg).ndn()
        ndn = bridge.ndn[0]
        try:
            peers += await open_conns(port, ATTACKERS[:1], per_address)
            first = len(ndn.faces)
            app = await open_conns(port, ["127.0.0.1"], 1)
            await wait_until(lambda: len(ndn.faces) == first + 1, 30, "the genuine app's face")
            peers += await open_conns(port, ATTACKERS[1:7], 8)
            second = len(ndn.faces)
            app_alive = alive(app)
            await g.served()
            m.sample()
            close_all(peers)
            await wait_until(lambda: len(ndn.faces) == 1, 30, "the attackers' faces gone")
            await g.recovered("NDN face connection flood", measure=m)
        finally:
            close_all(peers)
            close_all(app)
    return m.figures(per_address=per_address, faces_first_wave=first, faces_second_wave=second,
                     app_alive=app_alive, hits=dict(bridge.hits.counts))


async def mesh_idle_conns(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """32 idle TCP connections to the mesh listener from one address, and 12 peers that
    complete the handshake from another: genuine gateways dialling from a third address
    get in every time, the idle ones are cut off at the handshake timeout, and one
    address keeps at most its share of connections."""
    from pubmote.p2p import Host, KeyPair
    from pubmote.p2p.multistream import select
    from pubmote.p2p.noise import PROTOCOL_ID as NOISE
    from pubmote.p2p.noise import secure_outbound
    from pubmote.p2p.transport import RawConn
    from pubmote.p2p.yamux import PROTOCOL_ID as YAMUX

    m = Measure()
    idle, handshaking = scaled(32, scale), scaled(12, scale)
    caps: dict[str, Any] = {"mesh_listen": ["/ip4/127.0.0.1/tcp/0"],
                            "mesh_key_file": str(tmp / "gw.key"),
                            "mesh_handshake_timeout_s": 2.0, "mesh_max_inbound_per_ip": 8}
    peers: list[Peer] = []
    secured: list[RawConn] = []
    async with genuine_bridge(tmp, m, **caps) as (bridge, g):
        m.bound = Bound(bridge.cfg).mesh()
        host = bridge.mesh.host
        ma = host.listen_addrs[0]
        port = int(ma.tcp_host_port()[1])
        target = ma.with_p2p(str(host.peer_id))
        try:
            peers = await open_conns(port, ATTACKERS[:1], idle)
            for _ in range(handshaking):  # peers that do complete Noise, from one address
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
            from_b = sum(1 for c in host.connections.connections()
                         if "/%s/" % ATTACKERS[1] in str(c.remote_addr))
            genuine_dials = 0
            for _ in range(10):  # ten genuine gateways, each a new peer
                async with Host(KeyPair.generate()) as peer:
                    try:
                        conn = await peer.connect(target, timeout_s=5)
                        await conn.close()
                        genuine_dials += 1
                    except Exception as e:  # noqa: BLE001 - counted, shown
                        print("genuine dial failed: %r" % e)
            await g.served()
            await wait_until(lambda: alive(peers) == 0, 10,
                             "the idle mesh connections to be cut off")
            m.sample()
            close_all(peers)
            for raw in secured:
                raw.abort()
            await g.recovered("mesh connection flood", measure=m)
            status = bridge.status()
        finally:
            close_all(peers)
            for raw in secured:
                raw.abort()
    return m.figures(from_one_address=from_b, genuine_dials=genuine_dials, status=status)
