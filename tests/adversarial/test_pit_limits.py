"""The PIT under Interests from hostile NDN apps: a producer app registers a prefix it
never answers, flooders fill the PIT with maximum-lifetime Interests for it, and one
aggregates a single name under tens of thousands of nonces. The hub's own Interests (its
deliveries of commands to boards) never wait for room, an Interest's lifetime is capped,
what a face put in the PIT leaves with it, and the nonces kept per entry are bounded; the
bridge's memory stays within what the limits imply. A genuine simulated board is served
(its readings reach an SP subscriber, a command published to it through SP reaches it)
during the flood and within 10 s of the attackers leaving."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from attackers import ATTACKERS, Genuine, Memory, Peer, close_all, open_conns, rib_register

from e2e import boards_registered, bridge_with_boards, free_port, sp_connected, wait_until
from pubmote_wire import interest, name

RECOVERY_S = 10.0
HOUR_MS = 3_600_000
# the lifetime cap long enough that a loaded machine takes in every flooder's Interests
# before the first ones end (the default's 10 s)
CAPS = {"pit_max": 512, "pit_max_per_face": 128, "pit_max_lifetime_ms": 10_000,
        "pit_max_nonces": 8, "ndn_max_apps_per_ip": 8}


def run(body: Callable[[], Awaitable[None]], timeout_s: float = 120) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout_s))


def flood(prefix: str, count: int, lifetime_ms: int = HOUR_MS) -> bytes:
    return b"".join(interest.encode("%s/%d" % (prefix, i), nonce=i + 1, lifetime_ms=lifetime_ms)
                    for i in range(count))


async def _producer(port: int) -> list[Peer]:
    """An app that registers /evil and never answers what is forwarded to it."""
    prod = await open_conns(port, ATTACKERS[:1], 1, rib_register("/evil"))
    await wait_until(lambda: prod[0].received > 0, 30, "the rib/register reply")
    return prod


def _bridge(tmp_path: Path, port: int) -> Any:
    urls = {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()],
            "ndn_face": ["tcp://127.0.0.1:%d" % port]}
    return bridge_with_boards(tmp_path, 1, period_ms=200, **urls, **CAPS)


def test_pit_flood_blocks_no_command_and_leaves_with_its_faces(tmp_path: Path) -> None:
    """Five flooders, 160 one-hour Interests each (more than their share and, together,
    more than the PIT holds), toward an
    app that never answers: commands to the board are still delivered; the flooders'
    entries go when they disconnect; when they stay, their entries end at the lifetime
    cap."""
    async def body() -> None:
        port = free_port()
        async with _bridge(tmp_path, port) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            fwd = bridge.hub.fwd
            attackers: list[Peer] = []
            mem = Memory()
            try:
                await sp_connected(bridge)
                await g.served(20)
                mem.start()
                attackers += await _producer(port)
                for k in range(5):
                    attackers += await open_conns(port, [ATTACKERS[1 + k % 2]], 1,
                                                  flood("/evil/%d" % k, 160))
                # every flooder's Interests in: the per-face quota and the PIT's own cap hit
                await wait_until(lambda: fwd.counters["pit_full"] > 0
                                 and fwd.counters["pit_face_quota"] > 0, 60, "the PIT to fill")
                grown = mem.grown_kb()
                print("PIT flood: %d entries, heap +%d KiB" % (len(fwd.pit), grown))
                await g.served(15)  # commands to the board are delivered all the same
                assert len(fwd.pit) <= 512 + 64, len(fwd.pit)  # + the hub's own, a few
                close_all(attackers)
                # what the flooders put in the PIT leaves with them, not in an hour
                await wait_until(lambda: len(fwd.pit) < 16, RECOVERY_S, "the attackers' PIT entries "
                                 "to go with their faces (%d left)" % len(fwd.pit))
                await g.recovered("PIT flood")
                # they come back and stay: their Interests live no longer than the cap
                attackers = await _producer(port)
                attackers += await open_conns(port, ATTACKERS[1:2], 1, flood("/evil/x", 100))
                await wait_until(lambda: len(fwd.pit) >= 100, 30, "the second flood")
                # an hour-long Interest ends at the 10 s cap: well before the hour
                await wait_until(lambda: len(fwd.pit) < 16, 10 + RECOVERY_S, "the one-hour Interests "
                                 "to expire at the 10 s cap")
                await g.served()
            finally:
                mem.stop()
                close_all(attackers)
                g.close()
            hits = bridge.hits.counts
            assert hits["pit_max_per_face"] > 0 and hits["pit_max"] > 0
            assert hits["pit_max_lifetime_ms"] > 0

    run(body)


def test_pit_nonces_are_bounded(tmp_path: Path) -> None:
    """One name under 5,000 nonces, each aggregated into the pending entry: the entry
    keeps the last few, and the heap does not grow with the nonces."""
    async def body() -> None:
        port = free_port()
        async with _bridge(tmp_path, port) as bridge:
            await boards_registered(bridge, ["sim1"])
            g = Genuine(bridge)
            fwd = bridge.hub.fwd
            attackers: list[Peer] = []
            mem = Memory()
            try:
                await sp_connected(bridge)
                await g.served(20)
                attackers += await _producer(port)
                same = b"".join(interest.encode("/evil/same", nonce=n + 1, lifetime_ms=HOUR_MS)
                                for n in range(5_000))
                mem.start()
                attackers += await open_conns(port, ATTACKERS[2:3], 1, same)
                kept = [0]

                def nonces_seen() -> bool:
                    entry = fwd.pit.get(name.from_uri("/evil/same"))
                    kept[0] = max(kept[0], len(entry.nonces) if entry is not None else 0)
                    return fwd.counters["aggregated"] >= 4_900

                await wait_until(nonces_seen, 30, "the nonce flood (%d aggregated)"
                                 % fwd.counters["aggregated"])
                grown = mem.grown_kb()
                del same
                print("nonce flood: at most %d nonces kept, heap +%d KiB" % (kept[0], grown))
                await g.served()
                assert 0 < kept[0] <= 8, kept[0]
                assert grown < 128, "the nonce flood grew the heap by %d KiB" % grown
                close_all(attackers)
                await g.recovered("nonce flood")
            finally:
                mem.stop()
                close_all(attackers)
                g.close()
            assert bridge.hits.counts["pit_max_nonces"] > 0

    run(body)
