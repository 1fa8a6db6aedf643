"""Board identity by default: the bridge `make run` starts (`pubmote bridge --sim-boards 2`,
nothing else) keys its simulated boards and refuses a registration without a key; a keyed
board publishes only within its grant (its own topics and the keys file's "grants"), each
refusal counted as not_granted while its granted readings flow."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

from attackers import Peer, open_conns, registration

from e2e import (
    Collector,
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    probe_ctl,
    sp_connected,
    wait_until,
)
from pubmote.boards.fleet import SimFleet
from pubmote.core.auth import key_for_board
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config


def _urls(**extra: Any) -> dict[str, Any]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()], **extra}


def test_make_run_bridge_keys_its_boards_and_refuses_keyless_ones(tmp_path: Path) -> None:
    """The configuration of `make run` (sim boards, no key options): both boards have a
    key of their own, in a 0600 file of the sim folder and in the bridge's table; their
    signed readings arrive; a board without a key is refused, counted as anonymous."""
    async def body() -> None:
        port = free_port()
        cfg = load_config(None, {"sim_boards": 2, "sim_dir": str(tmp_path / "sim"),
                                 "sim_period_ms": 200,
                                 "sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
                                 "tcp": ["127.0.0.1:%d" % port]})
        assert cfg["sim_keys"] is True and cfg["allow_anonymous_boards"] is False
        async with Bridge(cfg, fleet=SimFleet.from_config(cfg)) as bridge:
            auth = bridge.hub.auth
            assert auth is not None and not auth.allow_anonymous
            keys_file = tmp_path / "sim" / "keys.json"
            assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
            stored = json.loads(keys_file.read_text())["boards"]
            assert set(stored) == {"sim1", "sim2"} and stored["sim1"] != stored["sim2"]
            assert {n: k.hex() for n, k in auth.keys.items()} == stored
            for b in bridge.fleet.boards:  # type: ignore[union-attr]
                assert b.config["key"] == stored[b.name]
            col = Collector(cfg["sp_pub"][0], b"/pubmote/demo/")
            peers: list[Peer] = []
            try:
                await boards_registered(bridge, ["sim1", "sim2"])
                await sp_connected(bridge)
                await col.wait_for(b"/pubmote/demo/sim1/", 2, 60)
                await col.wait_for(b"/pubmote/demo/sim2/", 2, 60)
                assert auth.accepted >= 2  # the registrations were checked signatures
                peers += await open_conns(port, ["127.0.0.6"], 1, registration("sim9"))
                await wait_until(lambda: auth.rejected["anonymous"] >= 1, 30,
                                 "the keyless registration refused")
                assert bridge.hub.board("sim9") is None
                # nor may it take a keyed board's name
                peers[0].write(registration("sim1"))
                await wait_until(lambda: auth.rejected["register_rejected"] >= 1, 30,
                                 "the unsigned registration as sim1 refused")
                assert bridge.hub.board("sim1").face_kind != "tcp"  # type: ignore[union-attr]
                assert auth.rejected["not_granted"] == 0  # demo topics carry the name
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()
                col.close()

    asyncio.run(asyncio.wait_for(body(), 240))


def test_keyed_board_publishes_only_within_its_grant(tmp_path: Path) -> None:
    """sim1 holds a key with a grant of /site/alerts: it publishes on its own topics and
    under /site/alerts; on /site/valve (neither) every attempt is refused, counted as
    not_granted, and nothing reaches subscribers."""
    async def body() -> None:
        keys = tmp_path / "keys.json"
        key = key_for_board(keys, "sim1")
        doc = json.loads(keys.read_text())
        doc["grants"] = {"sim1": ["/site/alerts"]}
        keys.write_text(json.dumps(doc))
        async with bridge_with_boards(tmp_path / "sim", 1, app="probe_app",
                                      extra={"key": key.hex()},
                                      **_urls(keys=str(keys))) as bridge:
            auth = bridge.hub.auth
            assert auth is not None and not auth.allow_anonymous
            assert auth.grants == {"sim1": [bytes(b) for b in auth.grants["sim1"]]}
            col = Collector(bridge.cfg["sp_pub"][0], b"/test/", b"/site/", b"/other/")
            pub = Publisher(bridge.cfg["sp_sub"][0])
            try:
                await boards_registered(bridge, ["sim1"])
                await sp_connected(bridge)
                await probe_ctl(pub, col, "sim1", b"pub:/site/valve|open")
                assert auth.rejected["not_granted"] >= 1, auth.rejected
                await probe_ctl(pub, col, "sim1", b"pub:/site/alerts/fire|yes")
                await col.wait_for(b"/site/alerts/fire|yes", 1, 30)
                await probe_ctl(pub, col, "sim1", b"pub:/other/sim1/x|mine")
                await col.wait_for(b"/other/sim1/x|mine", 1, 30)
                assert not col.with_prefix(b"/site/valve"), "a topic outside the grant got out"
                assert auth.rejected["not_granted"] >= 1
            finally:
                col.close()
                pub.close()

    asyncio.run(asyncio.wait_for(body(), 240))
