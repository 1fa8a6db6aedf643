"""What a running bridge says about itself: every listener it bound (the start-up line),
one status line of counters (what --no-view logs now and then, and at exit), and what is
wrong with a board face (a simulated board whose app crashed)."""

from __future__ import annotations

import time
from typing import Any

from pubmote.core.registry import BoardInfo
from pubmote_wire import sp

# the bridge is gateway.bridge.Bridge, which imports this module: typed as Any here
Bridge = Any


def _bound(server: Any) -> str:
    """host:port (or the socket path) a server or datagram transport is bound to."""
    socks = getattr(server, "sockets", None)
    name = socks[0].getsockname() if socks else server.get_extra_info("sockname")
    if isinstance(name, tuple):
        host = name[0]
        return "%s:%d" % ("[%s]" % host if ":" in host else host, name[1])
    return str(name)


def _where(listener: Any) -> str:
    """An SP endpoint's or NDN face's URL as bound (tcp://HOST:0 shows its port)."""
    if listener.server is not None and listener.url.startswith("tcp://"):
        return "tcp://" + _bound(listener.server)
    return str(listener.url)


def listeners(bridge: Bridge) -> list[str]:
    """Every address the bridge listens on, as bound (a port 0 shows the port it got)."""
    out: list[str] = []
    tls = " (TLS)" if bridge.link_guard is not None else ""
    out.extend("TCP boards %s%s" % (_bound(t.server), tls) for t in bridge.tcp
               if t.server is not None)
    out.extend("UDP boards %s" % _bound(srv) for srv in bridge.servers)
    out.extend("NDN %s" % _where(ndn) for ndn in bridge.ndn)
    for ep in bridge.sp:
        out.append("SP %s %s" % ("PUB" if ep.proto == sp.PUB else "SUB", _where(ep)))
    out.extend("serial %s" % getattr(f, "port", "?") for f in bridge.faces if hasattr(f, "baud"))
    mesh = bridge.mesh
    if mesh is not None and mesh.host is not None:
        pid = str(mesh.host.peer_id)
        out.extend("mesh %s" % a.with_p2p(pid) for a in mesh.host.listen_addrs)
    if bridge.retained is not None and bridge.retained.node.transport is not None:
        out.append("DHT udp %s" % _bound(bridge.retained.node.transport))
    return out


def asleep_note(b: BoardInfo, now: float | None = None) -> str | None:
    """"asleep, expected back in ~N s" (or "N s late") for a board asleep, else None."""
    if not b.asleep or b.wake_due is None:
        return None
    back_s = b.wake_due - (time.time() if now is None else now)
    if back_s >= 0:
        return "asleep, expected back in ~%.0f s" % max(back_s, 1.0)
    return "asleep, expected back %.0f s ago" % -back_s


def board_problems(bridge: Bridge) -> dict[int, str]:
    """face_id -> what is wrong with the board behind it, when the bridge knows: a
    simulated board whose app ended shows "crashed: <the last error line of its log>"."""
    fleet = bridge.fleet
    if fleet is None or not hasattr(fleet, "crashed"):
        return {}
    crashed: dict[str, str] = fleet.crashed()  # once: it may read each board's log
    if not crashed:
        return {}
    return {f.face_id: "crashed: %s" % crashed[str(f.port)] for f in bridge.all_faces()
            if str(getattr(f, "port", None)) in crashed}


def network_parts(bridge: Bridge) -> list[str]:
    """The NDN faces' apps, the mesh's peers and traffic, the DHT's nodes and topics: one
    part each, for the status line and the view."""
    parts = []
    for ndn in bridge.ndn:
        parts.append("NDN %s: %d apps, %d refused, %d outside the allowed names, %d bad "
                     "streams" % (
            _where(ndn), len(ndn.faces), ndn.admission.refused + ndn.allow.refused_source,
            ndn.allow.refused_name,
            ndn.bad_streams + sum(f.counters["bad_streams"] for f in ndn.faces.values())))
    mesh = bridge.mesh
    if mesh is not None and mesh.host is not None:
        m = mesh.counters
        parts.append("mesh: %d peers, %d out, %d in, %d out dropped, %d bad in" % (
            len(mesh.host.connected_peers()), m["out"], m["in"], m["out_dropped"],
            m["in_bad"]))
    if bridge.retained is not None:
        r, node = bridge.retained.counters, bridge.retained.node
        parts.append("DHT: %d nodes known, %d topics, %d published, %d received, "
                     "%d dropped" % (len(node.table), len(bridge.retained.entries),
                                     r["published"], r["received"], r["dropped"]))
    return parts


def status_line(bridge: Bridge) -> str:
    """One line of counters: boards, messages, faces, SP, NDN, mesh, DHT, journal."""
    hub = bridge.hub
    faces = bridge.all_faces()
    # a crashed board is down whatever its link says: it may have registered before
    problems = board_problems(bridge)
    boards = sorted(b.name for b in hub.board_infos() if b.up and not problems.get(b.face_id))
    down = []
    for f in faces:
        why = problems.get(f.face_id) or (getattr(f, "last_error", "") if not f.up else "")
        if why or not f.up:
            down.append(f.label + (" (%s)" % why if why else ""))
    c = hub.stats()
    parts = ["boards up %d: %s" % (len(boards), ", ".join(boards) or "-")]
    asleep = ["%s (%s)" % (b.name, asleep_note(b)) for b in hub.board_infos() if b.asleep]
    if asleep:
        parts.append("asleep %d: %s" % (len(asleep), ", ".join(sorted(asleep))))
    if down:
        parts.append("down: %s" % "; ".join(down))
    parts.append("messages %d, bad packets %d, fetch failures %d, bad frames %d" % (
        c["messages"], c["bad_packets"], c["fetch_failed"],
        sum(f.bad_frames() for f in faces if hasattr(f, "bad_frames"))))
    if bridge.link_guard is not None:
        parts.append(bridge.link_guard.summary())
    for ep in bridge.sp:
        if ep.proto == sp.PUB:
            parts.append("SP PUB %s: %d clients, %d sent in %d writes, %d dropped, "
                         "bridge-added latency %s" % (
                             _where(ep), ep.clients(), ep.counters["sent"],
                             ep.counters["writes"], ep.counters["dropped"],
                             ep.latency.summary()))
        else:
            parts.append("SP SUB %s: %d clients, %d refused, %d received, %d bad, %d refused "
                         "messages" % (
                _where(ep), ep.clients(), ep.admission.refused + ep.allow.refused_source,
                ep.counters["received"],
                ep.counters["bad_messages"] + ep.counters["bad_streams"],
                ep.counters["refused"] + ep.allow.refused_name))
    parts.extend(network_parts(bridge))
    if bridge.journal is not None:
        parts.append(bridge.journal.status_line())
    errors = bridge.internal_errors()
    if errors:
        parts.append("internal errors %d (contained; see the log)" % errors)
    parts.append("limits hit: %s" % bridge.limit_summary())
    return "; ".join(parts)
