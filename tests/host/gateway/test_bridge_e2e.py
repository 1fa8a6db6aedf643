"""End to end with real components: simulated boards (the MicroPython unix port running the
unchanged firmware on ptys), the bridge, nanomsg's nanocat and nng's pynng."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import cbor2
import pytest

import faults
from e2e import (
    Collector,
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    nanocat,
    probe_ctl,
    probe_report,
    sp_connected,
    wait_until,
)
from pubmote_wire import name, notify
from pubmote_wire.errors import DecodeError
from pubmote_wire.subfilter import SubFilter


def _urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


def test_board_to_nanocat_and_pynng_subscribers(tmp_path: Path) -> None:
    async def run() -> None:
        urls = _urls()
        async with bridge_with_boards(tmp_path, 2, period_ms=200, **urls) as bridge:
            await boards_registered(bridge, ["sim1", "sim2"])
            sub = Collector(urls["sp_pub"][0], b"/pubmote/demo/sim1/temperature")
            cat = await asyncio.create_subprocess_exec(
                nanocat(), "--sub", "--connect", urls["sp_pub"][0], "--subscribe",
                "/pubmote/demo/sim2/", "--raw", stdout=asyncio.subprocess.PIPE)
            try:
                lines = await sub.wait_for(b"/pubmote/demo/sim1/temperature|", 3)
                assert stdout_ok(cat)
                raw = await asyncio.wait_for(_read_at_least(cat, 3 * 40), 15)
            finally:
                cat.terminate()
                await cat.wait()
                sub.close()
            # pynng's SUB filter kept only sim1; each payload is the demo's CBOR reading
            assert all(x.startswith(b"/pubmote/demo/sim1/temperature|") for x in sub.lines)
            readings = [cbor2.loads(x.split(b"|", 1)[1]) for x in lines]
            assert [r["seq"] for r in readings] == sorted(r["seq"] for r in readings)
            assert all(15 < r["celsius"] < 30 for r in readings)
            # nanocat received only sim2's messages (raw: bodies back to back)
            assert b"/pubmote/demo/sim2/temperature|" in raw
            assert b"/pubmote/demo/sim1/" not in raw

    asyncio.run(run())


def stdout_ok(proc: asyncio.subprocess.Process) -> bool:
    return proc.returncode is None and proc.stdout is not None


async def _read_at_least(proc: asyncio.subprocess.Process, n: int) -> bytes:
    assert proc.stdout is not None
    buf = b""
    while len(buf) < n:
        chunk = await proc.stdout.read(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def test_pynng_and_nanocat_publishers_reach_board_subscribers(tmp_path: Path) -> None:
    async def run() -> None:
        urls = _urls()
        trace = tmp_path / "trace.jsonl"
        async with bridge_with_boards(tmp_path, 2, period_ms=1000, trace=str(trace),
                                      **urls) as bridge:
            await boards_registered(bridge, ["sim1", "sim2"])
            await wait_until(lambda: all(bridge.hub.board(b).filters for b in ("sim1", "sim2")),
                             10, "demo command subscriptions")
            acks = Collector(urls["sp_pub"][0], b"/pubmote/demo/")
            pub = Publisher(urls["sp_sub"][0])
            cat = await asyncio.create_subprocess_exec(
                nanocat(), "--pub", "--connect", urls["sp_sub"][0], "--data",
                "/pubmote/demo/sim2/command|hello-nanocat", "--interval", "0.3",
                stdout=asyncio.subprocess.DEVNULL)
            try:
                async def pynng_sender() -> None:
                    while True:
                        await pub.send(b"/pubmote/demo/sim1/command|hello-pynng")
                        await asyncio.sleep(0.3)

                sender = asyncio.get_running_loop().create_task(pynng_sender())
                got1 = await acks.wait_for(b"/pubmote/demo/sim1/ack|", 1)
                got2 = await acks.wait_for(b"/pubmote/demo/sim2/ack|", 1)
                sender.cancel()
            finally:
                cat.terminate()
                await cat.wait()
                pub.close()
                acks.close()
            assert got1[0] == b"/pubmote/demo/sim1/ack|hello-pynng"
            assert got2[0] == b"/pubmote/demo/sim2/ack|hello-nanocat"
            # each board was sent only its own command topic (the boards filter locally too,
            # so their echoes alone would not show an extra delivery): read the bridge's trace
            sent = _notified_topics(trace)
            assert sent["serial:sim1.tty"] == {"/pubmote/demo/sim1/command"}, sent
            assert sent["serial:sim2.tty"] == {"/pubmote/demo/sim2/command"}, sent

    asyncio.run(run())


def test_directed_message_is_a_demo_command(tmp_path: Path) -> None:
    # the demo takes directed messages into its command queue (node.directed(sub)): one
    # addressed to every board is echoed on .../ack as a command is
    async def run() -> None:
        urls = _urls()
        async with bridge_with_boards(tmp_path, 1, period_ms=1000, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            acks = Collector(urls["sp_pub"][0], b"/pubmote/demo/sim1/ack|")
            pub = Publisher(urls["sp_sub"][0])

            async def sender() -> None:
                while True:
                    await pub.send(b"/pubmote/to/*/*|/cmd|hello-directed")
                    await asyncio.sleep(0.5)

            task = asyncio.get_running_loop().create_task(sender())
            try:
                got = await acks.wait_for(b"/pubmote/demo/sim1/ack|", 1)
            finally:
                task.cancel()
                pub.close()
                acks.close()
            assert got[0] == b"/pubmote/demo/sim1/ack|hello-directed"

    asyncio.run(run())


def _notified_topics(trace: Path) -> dict[str, set[str]]:
    """face -> the topics of the notifies the bridge sent on it (what it delivered)."""
    out: dict[str, set[str]] = {}
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        if rec["dir"] != "out":
            continue
        try:
            topic = notify.parse_notify_interest(bytes.fromhex(rec["hex"]))[0]
        except DecodeError:
            continue
        out.setdefault(rec["face"], set()).add(name.to_uri(bytes(topic)))
    return out


def test_board_to_board(tmp_path: Path) -> None:
    async def run() -> None:
        urls = _urls()
        extra = {"seq_period_ms": 100, "watch": ["/test/sim1/seq"], "echo": True}
        async with bridge_with_boards(tmp_path, 2, app="probe_app", extra=extra,
                                      **urls) as bridge:
            await boards_registered(bridge, ["sim1", "sim2"])
            col = Collector(urls["sp_pub"][0], b"/test/sim2/got|")
            try:
                got = await col.wait_for(b"/test/sim2/got|/test/sim1/seq|", 5, timeout_s=20)
            finally:
                col.close()
            # sim2 never echoes its own seq: its filter is /test/sim1/seq only
            assert not any(b"/test/sim2/seq" in x for x in col.lines)
            seqs = [int(x.rsplit(b"|", 1)[1]) for x in got]
            assert len(set(seqs)) == len(seqs)
            assert bridge.hub.board("sim2").counters["delivered"] >= 5

    asyncio.run(run())


def test_filter_semantics_end_to_end(tmp_path: Path) -> None:
    """nanomsg-style filters on a board: prefixes, many topics, unsubscribe, empty matches all; the
    bridge sends only matching messages, so the board never filters one out itself."""

    async def run() -> None:
        urls = _urls()
        async with bridge_with_boards(tmp_path, 1, app="probe_app", **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            board = bridge.hub.boards["sim1"]
            col = Collector(urls["sp_pub"][0], b"/test/sim1/")
            pub = Publisher(urls["sp_sub"][0])
            await sp_connected(bridge)
            try:
                async def step(cmd: bytes, want_filters: list[bytes],
                               send: list[bytes]) -> list[bytes]:
                    await probe_ctl(pub, col, "sim1", cmd)
                    await wait_until(lambda: sorted(board.filters) == sorted(want_filters),
                                     10, "filters %r at the bridge" % want_filters)
                    before = board.counters["delivered"]
                    want = SubFilter()
                    for f in want_filters:
                        want.subscribe(f)
                    n = sum(1 for line in send if want.matches(line))
                    for line in send:
                        await pub.send(line)
                    await wait_until(lambda: board.counters["delivered"] >= before + n, 10,
                                     "%d matching messages delivered to the board" % n)
                    report = await probe_report(pub, col, "sim1")
                    assert report["filtered"] == 0, report
                    return list(report["got"])  # type: ignore[call-overload]

                ctl = b"/test/sim1/ctl|"
                got = await step(b"sub:/f/a/", [ctl, b"/f/a/"],
                                 [b"/f/a/1|x", b"/f/b/1|y", b"/g/x|z"])
                assert got == [b"/f/a/1|x"]
                got = await step(b"sub:/g/", [ctl, b"/f/a/", b"/g/"],
                                 [b"/f/b/2|y", b"/g/x|z2", b"/f/a/2|x2"])
                assert got == [b"/f/a/1|x", b"/g/x|z2", b"/f/a/2|x2"]
                got = await step(b"unsub:/f/a/", [ctl, b"/g/"],
                                 [b"/f/a/3|x3", b"/g/y|w"])
                assert got[-1] == b"/g/y|w" and b"/f/a/3|x3" not in got
                got = await step(b"sub:", [ctl, b"/g/", b""], [b"/f/b/4|q"])
                assert b"/f/b/4|q" in got
            finally:
                col.close()
                pub.close()

    asyncio.run(run())


def test_garbage_on_the_line_and_cable_replug(tmp_path: Path) -> None:
    async def run() -> None:
        urls = _urls()
        async with bridge_with_boards(tmp_path, 1, app="probe_app",
                                      extra={"seq_period_ms": 100}, **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            assert bridge.fleet is not None
            cable = bridge.fleet.boards[0].cable
            face = bridge.hub.boards["sim1"].face
            col = Collector(urls["sp_pub"][0], b"/test/sim1/")
            pub = Publisher(urls["sp_sub"][0])
            await sp_connected(bridge)
            try:
                await col.wait_for(b"/test/sim1/seq|", 3)
                garbage = bytes((i * 37 + 11) & 0xFF for i in range(600))
                for _ in range(5):
                    cable.inject(1, garbage)  # towards the bridge
                    cable.inject(0, garbage)  # towards the board
                    await asyncio.sleep(0.1)
                n = len(col.with_prefix(b"/test/sim1/seq|"))
                await col.wait_for(b"/test/sim1/seq|", n + 5)
                assert face.bad_frames() > 0
                report = await probe_report(pub, col, "sim1")
                assert report["frames_bad"] > 0  # type: ignore[operator]
                # pull the cable, put it back: both ends reopen the line by themselves
                cable.pull()
                await wait_until(lambda: not face.up, 30, "the bridge to see the line go")
                await asyncio.sleep(0.5)
                cable.plug()
                n = len(col.with_prefix(b"/test/sim1/seq|"))
                await col.wait_for(b"/test/sim1/seq|", n + 5, timeout_s=20)
                assert bridge.fleet.boards[0].alive()
            finally:
                col.close()
                pub.close()

    asyncio.run(run())


@pytest.mark.timeout(120)
def test_bridge_killed_and_restarted_loses_nothing_acked(tmp_path: Path) -> None:
    r = asyncio.run(faults.bridge_killed_and_restarted(tmp_path))
    assert r["acked"] >= 30 and r["acked_lost"] == 0, r


@pytest.mark.parametrize("link", ["tcp", "udp"])
def test_wifi_links_tcp_and_udp(tmp_path: Path, link: str) -> None:
    """The WiFi links (ESP32, Pico W) with the unix port on loopback: same firmware."""

    async def run() -> None:
        urls = _urls()
        port = free_port()
        face = {link: ["127.0.0.1:%d" % port]}
        extra = {"link": link, "host": "127.0.0.1", "port": port}
        async with bridge_with_boards(tmp_path, 1, period_ms=200, extra=extra, **face,
                                      **urls) as bridge:
            await boards_registered(bridge, ["sim1"])
            assert bridge.hub.board("sim1").face_kind == link
            col = Collector(urls["sp_pub"][0], b"/pubmote/demo/sim1/")
            pub = Publisher(urls["sp_sub"][0])
            await sp_connected(bridge)
            try:
                await col.wait_for(b"/pubmote/demo/sim1/temperature|", 3)
                await wait_until(lambda: bool(bridge.hub.board("sim1").filters), 10,
                                 "the board's command subscription")
                await pub.send(b"/pubmote/demo/sim1/command|over-" + link.encode())
                got = await col.wait_for(b"/pubmote/demo/sim1/ack|", 1)
            finally:
                col.close()
                pub.close()
            assert got[0] == b"/pubmote/demo/sim1/ack|over-" + link.encode()

    asyncio.run(run())
