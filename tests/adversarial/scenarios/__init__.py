"""The attack and fault scenarios of the adversarial suite, one function per class of
finding: each runs its attack or fault against a bridge with a genuine board and returns
its figures (measure.Measure's: acked and lost, the bridge's memory before the attack,
at its peak and after against the bound its limits imply, how soon the genuine board was
served again; and its own). The tests call them and assert; `make harden-report` runs
every one in SCENARIOS at a scale and prints them."""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from . import accounting, connections, decoders, journal, links, stale, stops, tables

Scenario = Callable[[Path, float], Coroutine[Any, Any, dict[str, Any]]]

# key: (what the report calls it, the function); in the report's order
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "hostile_cbor": ("hostile CBOR payloads, view on", decoders.hostile_cbor),
    "journal_removed": ("journal folder removed", journal.journal_removed),
    "journal_no_space": ("journal disk out of space",
                         functools.partial(journal.journal_full, what="space")),
    "journal_no_inodes": ("journal disk out of inodes",
                          functools.partial(journal.journal_full, what="inodes")),
    "stop_sigint": ("stop under load: SIGINT",
                    functools.partial(stops.stop_under_load, sig=signal.SIGINT)),
    "stop_sigterm": ("stop under load: SIGTERM",
                     functools.partial(stops.stop_under_load, sig=signal.SIGTERM)),
    "kill_restart": ("kill -9 + restart under load", stops.kill_restart),
    "sp_handshake": ("SP subscriber in its handshake", accounting.sp_handshake),
    "sp_reset": ("SP subscriber that resets", accounting.sp_reset),
    "sp_conn_flood": ("SP connection flood", connections.sp_conn_flood),
    "tcp_idle_flood": ("idle board-TCP flood", connections.tcp_idle_flood),
    "udp_slot_flood": ("UDP slot flood", connections.udp_slot_flood),
    "ndn_conn_flood": ("NDN face connection flood", connections.ndn_conn_flood),
    "pit_flood": ("PIT flood", tables.pit_flood),
    "pit_nonces": ("PIT nonce flood", tables.pit_nonces),
    "fake_registrations": ("fake registrations", tables.fake_registrations),
    "route_flood": ("route flood", tables.route_flood),
    "topic_flood": ("unique-topic flood", tables.topic_flood),
    "mesh_idle_conns": ("libp2p idle connections", connections.mesh_idle_conns),
    "mesh_forgery": ("forged mesh envelopes", stale.mesh_forgery),
    "retained_reboot": ("rebooted board's retained value", stale.retained_reboot),
    "noisy_line": ("noisy serial line", links.noisy_line),
    "power_cuts": ("power cuts mid-publish", links.power_cuts),
    "slow_subscriber": ("slow SP subscriber", links.slow_subscriber),
    "board_flood": ("flood from one board", links.board_flood),
}
