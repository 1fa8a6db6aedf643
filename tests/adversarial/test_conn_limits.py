"""Connections a peer opens and holds: on every listener (SP PUB and SUB, the board TCP and
UDP faces, the NDN face, the mesh) the bridge holds at most its caps, per listener and
per source address, and cuts off the peers that never finish a handshake, never register
a board or go quiet. Attackers come from other loopback addresses than the genuine peers;
through every attack a genuine simulated board is served (its readings reach an SP
subscriber, a command published to it through SP reaches it, nothing it saw acked is
lost), and again within 10 s of the attackers leaving, the bridge's memory within what
its limits imply. The scenarios: tests/adversarial/scenarios/connections.py."""

from __future__ import annotations

from pathlib import Path

from attackers import genuine_served, run
from scenarios import connections


def test_sp_connections_are_capped_and_silent_peers_cut_off(tmp_path: Path) -> None:
    r = run(connections.sp_conn_flood(tmp_path))
    genuine_served(r)
    assert max(r["held_first_wave"]) <= 1 + 2 * 12, r  # the genuine client, 12 per address
    assert max(r["held_second_wave"]) <= 40, r
    assert r["held_after_timeout"] == [1, 1], r
    hits = r["hits"]
    assert hits["sp_max_conns_per_ip"] >= 2 * 2 * (r["per_address"] - 12), hits
    assert hits["sp_max_conns"] > 0 and hits["sp_handshake_timeout_s"] >= 40, hits
    assert "sp_max_conns_per_ip" in r["status"]


def test_board_tcp_connections_capped_and_silent_ones_closed(tmp_path: Path) -> None:
    r = run(connections.tcp_idle_flood(tmp_path))
    genuine_served(r)
    assert r["faces_first_wave"] <= 1 + 3 * 8 and r["faces_second_wave"] <= 40, r
    hits = r["hits"]
    assert hits["tcp_max_conns_per_ip"] >= 2 * (r["per_address"] - 8), hits
    assert hits["tcp_max_conns"] > 0, hits
    assert hits["board_register_timeout_s"] > 0 and hits["board_idle_timeout_s"] >= 8, hits
    assert r["genuine_up"]


def test_udp_address_slots_are_capped_and_given_back(tmp_path: Path) -> None:
    r = run(connections.udp_slot_flood(tmp_path))
    genuine_served(r)
    assert r["faces_under_attack"] <= 32, r
    assert r["late_kind"] == "udp", r  # the new UDP board answered during the attack
    hits = r["hits"]
    assert hits["udp_max_boards_per_ip"] > 0 and hits["udp_max_boards"] > 0, hits
    assert hits["board_register_timeout_s"] > 0 and hits["board_idle_timeout_s"] > 0, hits


def test_ndn_face_caps_per_address(tmp_path: Path) -> None:
    r = run(connections.ndn_conn_flood(tmp_path))
    genuine_served(r)
    assert r["faces_first_wave"] <= 6 and r["faces_second_wave"] <= 24, r
    assert r["app_alive"] == 1, r  # the genuine local app got in and stayed
    hits = r["hits"]
    assert hits["ndn_max_apps_per_ip"] >= r["per_address"] - 6 and hits["ndn_max_apps"] > 0


def test_mesh_inbound_caps_per_address(tmp_path: Path) -> None:
    r = run(connections.mesh_idle_conns(tmp_path))
    genuine_served(r)
    assert r["from_one_address"] <= 8, r
    assert r["genuine_dials"] == 10, "%d of 10 genuine dials got in" % r["genuine_dials"]
    assert "mesh_max_inbound_per_ip" in r["status"] and "mesh_handshake_timeout_s" in r["status"]
