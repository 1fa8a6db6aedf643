"""`pubmote update` end to end on simulated boards (the MicroPython unix port running the
firmware, keyed as `pubmote bridge --sim-boards` makes them): the CLI reaches the bridge in
this process through its control socket; the boards fetch the app as NDN Data segments,
check it, switch and reboot. A good app ends healthy and runs; bad ones roll back by
themselves (one that raises at import, one that never registers, one that blocks the
board); a failed canary stops the roll-out; a power cut at any point of an
update leaves the board a whole app. Each test's bridge has a control endpoint of its own
(tests/conftest.py sets PUBMOTE_CONTROL), which the CLI finds the same way."""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e import APPS, boards_registered, bridge_with_boards, wait_until
from pubmote.core.messages import Message
from pubmote.gateway.bridge import Bridge

GOOD = APPS / "update_good"
BROKEN = APPS / "update_broken"
HANG = APPS / "update_hang"
BLOCK = APPS / "update_block"


async def update(*args: str) -> tuple[int, str, str]:
    """Run `pubmote update ARGS` (this checkout's), its exit status, stdout and stderr."""
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pubmote", "update", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    out, err = await asyncio.wait_for(p.communicate(), 240)
    assert p.returncode is not None
    return p.returncode, out.decode(), err.decode()


def final_states(out: str) -> dict[str, str]:
    """board -> its last state in the CLI's progress lines."""
    states = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("sim"):
            states[parts[0]] = parts[1]
    return states


def pointer(tmp: Path, board: str) -> dict[str, Any] | None:
    p = tmp / (board + ".fs") / "app.ptr"
    return json.loads(p.read_text()) if p.exists() else None


def view_text(bridge: Bridge) -> str:
    from rich.console import Console

    from pubmote.gateway.view import render

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render(bridge))
    return console.export_text()


class Topics:
    """Topics the hub relays, from now on."""

    def __init__(self, bridge: Bridge) -> None:
        self.seen: list[tuple[bytes, bytes]] = []
        bridge.hub.add_listener(self._on)

    def _on(self, msg: Message) -> None:
        self.seen.append((msg.topic, msg.payload))

    def has(self, topic: bytes, payload: bytes | None = None) -> bool:
        return any(t == topic and (payload is None or p == payload) for t, p in self.seen)


def test_update_three_boards(tmp_path: Path) -> None:
    async def run() -> None:
        async with bridge_with_boards(tmp_path, 3, sim_keys=True) as bridge:
            names = ["sim1", "sim2", "sim3"]
            await boards_registered(bridge, names)
            topics = Topics(bridge)
            code, out, err = await update("--app", str(GOOD), "--config", 'version="v2"',
                                          "--timeout", "60", *names)
            assert code == 0, out + err
            assert final_states(out) == dict.fromkeys(names, "healthy"), out
            assert "3 of 3 boards healthy" in out
            assert out.count("(updater heap +") >= 3, out  # each board's updater's heap
            for n in names:  # the new app runs, with its new config
                await wait_until(lambda n=n: topics.has(b"/test/%s/version" % n.encode(),
                                                        b"v2"), 30, "%s's new app" % n)
                ptr = pointer(tmp_path, n)
                assert ptr is not None and ptr["cur"] and "trial" not in ptr
            code, out, _ = await update("--status")
            assert code == 0 and out.count("healthy") == 3, out
            assert view_text(bridge).count("update healthy") == 3  # the live view too

    asyncio.run(run())


def test_broken_and_hanging_apps_roll_back(tmp_path: Path) -> None:
    async def run() -> None:
        async with bridge_with_boards(tmp_path, 2, sim_keys=True) as bridge:
            names = ["sim1", "sim2"]
            await boards_registered(bridge, names)
            code, out, _ = await update("--app", str(BROKEN), "--timeout", "20", *names)
            assert code == 1
            assert final_states(out) == dict.fromkeys(names, "rolledback"), out
            assert "ValueError: broken app: raises at import" in out
            code, out, _ = await update("--app", str(HANG), "--timeout", "5", "--all")
            assert code == 1
            assert final_states(out) == dict.fromkeys(names, "rolledback"), out
            # the event loop's watch says so at 5 s (on a machine so loaded that the loop
            # lags 2 s behind, the watchdog thread says it first)
            assert ("not healthy within 5s (never registered)" in out
                    or "hung: the app blocked the board" in out), out
            # one that blocks the board at import: the event loop never runs again
            code, out, _ = await update("--app", str(BLOCK), "--timeout", "5", "--all")
            assert code == 1
            assert final_states(out) == dict.fromkeys(names, "rolledback"), out
            assert "hung: the app blocked the board for 7s" in out
            topics = Topics(bridge)
            for n in names:  # back on the demo app (the deployed one), running
                ptr = pointer(tmp_path, n)
                assert ptr is not None and ptr["cur"] == "" and "trial" not in ptr
                await wait_until(lambda n=n: topics.has(
                    b"/pubmote/demo/%s/temperature" % n.encode()), 30, "%s's demo app" % n)

    asyncio.run(run())


def test_canary_failure_stops_the_rollout(tmp_path: Path) -> None:
    async def run() -> None:
        async with bridge_with_boards(tmp_path, 3, sim_keys=True) as bridge:
            await boards_registered(bridge, ["sim1", "sim2", "sim3"])
            code, out, _ = await update("--app", str(BROKEN), "--canary", "1", "--all")
            assert code == 1
            assert final_states(out) == {"sim1": "rolledback", "sim2": "skipped",
                                         "sim3": "skipped"}, out
            assert "canary sim1 not healthy" in out
            assert pointer(tmp_path, "sim2") is None and pointer(tmp_path, "sim3") is None

    asyncio.run(run())


@pytest.mark.parametrize("fetched", [0.6, 1.0])
def test_a_transfer_cut_short_resumes(tmp_path: Path, fetched: float) -> None:
    # the board's power is cut with most of a 20 kB app fetched, or all of it (before it
    # switched, or after with its word lost): powered again, it fetches only what it had not
    # written, called again by the bridge
    app = tmp_path / "app"
    app.mkdir()
    (app / "app.py").write_bytes((GOOD / "app.py").read_bytes())
    (app / "pad.py").write_text("DATA = %r\n" % ("x" * 20000))

    async def run() -> None:
        async with bridge_with_boards(tmp_path / "sim", 1, sim_keys=True) as bridge:
            await boards_registered(bridge, ["sim1"])
            job = asyncio.create_task(update("--app", str(app), "sim1"))
            assert bridge.control is not None
            ups = bridge.control.producer.updates
            await wait_until(lambda: "sim1" in ups and ups["sim1"].bytes
                             >= fetched * ups["sim1"].total, 60, "the transfer's part")
            board = bridge.fleet.boards[0]  # type: ignore[union-attr]
            board.power_off()
            board.start()
            code, out, err = await job
            assert code == 0, out + err
            segments = ups["sim1"].package.segments
            # without the resume: 60 % of them, then all of them again
            assert ups["sim1"].served < 1.3 * segments, (ups["sim1"].served, segments)

    asyncio.run(run())


def _whole(tmp: Path, board: str, packages: dict[str, dict[str, bytes]]) -> str:
    """The app the board's pointer names, checked whole: "" (the deployed one) or the
    package's key whose files its folder holds exactly."""
    ptr = pointer(tmp, board)
    if ptr is None or not ptr["cur"]:
        return ""
    folder = tmp / (board + ".fs") / "apps" / ptr["cur"]
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "config.json"}
    for key, pkg in packages.items():
        if files == pkg:
            return key
    raise AssertionError("board %s: %s holds a mix: %s" % (board, folder, sorted(files)))


async def _cut_point(bridge: Bridge, phase: int, rnd: random.Random) -> None:
    """Wait for the moment of the cut: 0, a random part of the transfer fetched; 1, the
    board said staged (it is switching); 2, a little after (rebooting, the new app on
    trial); 3, a random moment."""
    def update_of() -> Any:
        assert bridge.control is not None
        return bridge.control.producer.updates.get("sim1")

    if phase == 3:
        await asyncio.sleep(rnd.uniform(0.3, 1.5))
        return
    await wait_until(lambda: update_of() is not None and update_of().state != "queued", 30,
                     "the update to start")
    if phase == 0:
        part = rnd.uniform(0.1, 0.9)
        await wait_until(lambda: update_of().bytes >= part * update_of().total
                         or update_of().state not in ("offered", "fetching"), 30,
                         "the transfer to go on")
        return
    await wait_until(lambda: update_of().state not in ("offered", "fetching"), 30,
                     "the board to stage the update")
    if phase == 2:
        await asyncio.sleep(rnd.uniform(0.0, 1.0))


@pytest.mark.timeout(600)
def test_power_cut_leaves_a_whole_app(tmp_path: Path) -> None:
    # two ~20 kB apps, updated in turn; the board's power is cut at a random moment of each
    # update (fetching, staging, the switch, the reboot), then it is powered again
    apps = {}
    rnd = random.Random(7)
    for key in ("a", "b"):
        d = tmp_path / ("app_" + key)
        d.mkdir()
        (d / "app.py").write_bytes((GOOD / "app.py").read_bytes())
        pad = "".join("    %r\n" % "".join(rnd.choice("abcdef") for _ in range(70))
                      for _ in range(270))
        (d / "pad.py").write_text("# padding %s\nDATA = (\n%s)\n" % (key, pad))
        apps[key] = {p.name: p.read_bytes() for p in d.iterdir()}

    outcomes: list[tuple[int, str | None]] = []

    async def run() -> None:
        async with bridge_with_boards(tmp_path / "sim", 1, sim_keys=True) as bridge:
            await boards_registered(bridge, ["sim1"])
            board = bridge.fleet.boards[0]  # type: ignore[union-attr]
            for i in range(12):
                key = "ab"[i % 2]
                job = asyncio.create_task(update("--app", str(tmp_path / ("app_" + key)),
                                                 "--timeout", "20", "sim1"))
                await _cut_point(bridge, i % 4, rnd)
                before = bridge.hub.boards["sim1"].boot
                board.power_off()
                board.start()
                code, out, _ = await job
                outcomes.append((code, final_states(out).get("sim1")))
                # after the cut the board boots a whole app: the old one or the new one
                got = _whole(tmp_path / "sim", "sim1", apps)
                assert got in ("", "a", "b")
                # it runs: registered since the cut (a new boot)
                await wait_until(lambda before=before: bridge.hub.boards["sim1"].boot
                                 != before and not bridge.hub.boards["sim1"].down, 60,
                                 "sim1 to register after the cut")
                if code == 0:
                    assert got == key, out

    asyncio.run(run())
    print("power cuts: (exit status, state)", outcomes)


def test_tampered_updates_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a manifest not signed with the board's key, and a segment changed on the way (its
    # own digest right, the whole wrong): the board refuses both, on its old app
    from pubmote.gateway.update import package, producer
    from pubmote_wire.hmac256 import HmacSigner

    async def run() -> None:
        async with bridge_with_boards(tmp_path, 1, sim_keys=True) as bridge:
            await boards_registered(bridge, ["sim1"])
            topics = Topics(bridge)
            with monkeypatch.context() as m:
                m.setattr(producer, "HmacSigner", lambda key: HmacSigner(b"\x01" * 32))
                code, out, _ = await update("--app", str(GOOD), "sim1")
            assert code == 1 and final_states(out) == {"sim1": "failed"}, out
            assert "manifest signature does not verify" in out
            real = package.AppPackage.segment
            with monkeypatch.context() as m:
                m.setattr(package.AppPackage, "segment", lambda self, i: bytes(
                    b ^ (i == 0) for b in real(self, i)))
                code, out, _ = await update("--app", str(GOOD), "sim1")
            assert code == 1 and final_states(out) == {"sim1": "failed"}, out
            assert "does not match its manifest's SHA-256" in out
            assert pointer(tmp_path, "sim1") is None  # nothing switched
            await wait_until(lambda: topics.has(b"/pubmote/demo/sim1/temperature"), 30,
                             "the demo app still running")

    asyncio.run(run())
