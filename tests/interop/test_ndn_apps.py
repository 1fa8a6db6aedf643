"""NDN applications against the bridge's NFD-compatible face, each a real python-ndn /
ndn-python-repo process: PubSub both ways with boards and SP clients, the publisher's
forwarding hint, express_interest for a board's named data, and bad input from apps."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import cbor2

from e2e import Collector, Publisher, boards_registered, bridge_with_boards, free_port, wait_until
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name

APPS = Path(__file__).resolve().parent / "ndn_apps"


async def ndn_app(tmp: Path, sock: Path, script: str, *args: str,
                  stdin: bool = False) -> asyncio.subprocess.Process:
    env = dict(os.environ, HOME=str(tmp), NDN_CLIENT_TRANSPORT="unix://%s" % sock,
               PYTHONPATH=str(APPS))
    return await asyncio.create_subprocess_exec(
        sys.executable, str(APPS / script), *args, env=env, cwd=str(APPS),
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)


async def finish(proc: asyncio.subprocess.Process, timeout_s: float = 60) -> list[str]:
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    return out.decode(errors="replace").splitlines()


def ndn_cfg(tmp: Path) -> dict[str, Any]:
    return {"ndn_face": ["unix://%s" % (tmp / "nfd.sock")],
            "sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()],
            "trace": str(tmp / "trace.jsonl")}


def test_express_interest_fetches_board_data_and_unserved_names_are_nacked(
        tmp_path: Path) -> None:
    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        async with bridge_with_boards(tmp_path, 1, app="probe_app", **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            proc = await ndn_app(tmp_path, tmp_path / "nfd.sock", "fetch.py",
                                 "/test/sim1/data/hello", "/nobody/serves/this")
            lines = await finish(proc)
            assert "DATA /test/sim1/data/hello sim1:/test/sim1/data/hello" in lines, lines
            assert "NACK /nobody/serves/this 150" in lines, lines  # NoRoute
            assert bridge.hub.fwd.counters["no_route"] >= 1

    asyncio.run(run())


def test_pubsub_app_publisher_reaches_board_and_sp_subscribers(tmp_path: Path) -> None:
    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        async with bridge_with_boards(tmp_path, 1, app="probe_app",
                                      extra={"watch": ["/app/topic|"]}, **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            col = Collector(cfg["sp_pub"][0], b"/app/topic|", b"/test/sim1/")
            pub = Publisher(cfg["sp_sub"][0])
            try:
                await wait_until(lambda: all(any(c.ready for c in ep.conns)
                                             for ep in bridge.sp), 10, "SP clients")
                proc = await ndn_app(tmp_path, tmp_path / "nfd.sock", "pubsub_pub.py",
                                     "/app/topic", "hello", "3")
                lines = await finish(proc)
                assert "OK 3" in lines, lines  # every notify was acked by the bridge
                got = await col.wait_for(b"/app/topic|", 3)
                assert sorted(got) == [b"/app/topic|hello-%d" % i for i in range(3)]
                await wait_until(lambda: bridge.hub.board("sim1").counters["delivered"] >= 3,
                                 10, "delivery to the board")
                await pub.send(b"/test/sim1/ctl|report")
                rep = await col.wait_for(b"/test/sim1/report|", 1)
                report = cbor2.loads(rep[0].split(b"|", 1)[1])
                assert sorted(report["got"]) == [b"/app/topic|hello-%d" % i for i in range(3)]
            finally:
                col.close()
                pub.close()

    asyncio.run(run())


def test_board_and_sp_publishers_reach_pubsub_subscriber(tmp_path: Path) -> None:
    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        async with bridge_with_boards(tmp_path, 1, app="probe_app",
                                      extra={"seq_period_ms": 100}, **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            pub = Publisher(cfg["sp_sub"][0])
            proc = await ndn_app(tmp_path, tmp_path / "nfd.sock", "pubsub_sub.py",
                                 "/test/sim1/seq", "/sp/topic", stdin=True)
            lines: list[str] = []
            try:
                assert proc.stdout is not None and proc.stdin is not None
                await wait_until(lambda: len(bridge.hub.app_subs) == 1 and len(
                    next(iter(bridge.hub.app_subs.values())).filters) == 2, 30,
                    "the app's two subscriptions at the bridge")
                await pub.send(b"/sp/topic|from-sp")

                def seqs() -> list[str]:
                    return [x for x in lines if x.startswith("MSG /test/sim1/seq ")]

                deadline = time.monotonic() + 60
                while len(seqs()) < 10 or "MSG /sp/topic from-sp" not in lines:
                    left = deadline - time.monotonic()
                    assert left > 0, lines  # what the app saw by the deadline
                    line = await asyncio.wait_for(proc.stdout.readline(), left)
                    assert line, lines  # the app ended early
                    lines.append(line.decode(errors="replace").rstrip("\n"))
                proc.stdin.close()
                lines += await finish(proc)
            finally:
                pub.close()

    asyncio.run(run())


def test_publisher_forwarding_hint_is_honoured(tmp_path: Path) -> None:
    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        async with bridge_with_boards(tmp_path, 1, app="probe_app",
                                      extra={"watch": ["/hinted/|"]}, **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            col = Collector(cfg["sp_pub"][0], b"/hinted/")
            try:
                await wait_until(lambda: any(c.ready for c in bridge.sp[0].conns), 10, "SP")
                proc = await ndn_app(tmp_path, tmp_path / "nfd.sock", "pubsub_pub.py",
                                     "/hinted/topic", "via-hint", "1", "/hint/app1")
                lines = await finish(proc)
                assert "OK 1" in lines, lines
                assert (await col.wait_for(b"/hinted/topic|", 1))[0] == b"/hinted/topic|via-hint-0"
            finally:
                col.close()
            # /app/pub was never announced: the fetch went by the hint, and carried it
            assert not any(ndn_name.is_prefix(ndn_name.from_uri("/app/pub"), p)
                           for p in bridge.hub.fwd.fib)
            fetches = [r for r in _trace(tmp_path) if r["dir"] == "out"
                       and r["face"].startswith("ndn:") and "/app/pub/msg/" in r["text"]]
            assert fetches and all("ForwardingHint" in r["text"] for r in fetches)

    asyncio.run(run())


def _trace(tmp: Path) -> list[dict[str, Any]]:
    from pubmote_wire import dissect

    out = []
    for line in (tmp / "trace.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["text"] = dissect.dissect_hex(rec["hex"])[0]
        out.append(rec)
    return out


# ---- bad input from applications ----------------------------------------------------------


class RawApp:
    """A hand-made NDN app on the bridge's unix socket: sends what a broken app would."""

    def __init__(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.r, self.w = r, w

    @classmethod
    async def connect(cls, sock: Path) -> RawApp:
        r, w = await asyncio.open_unix_connection(str(sock))
        return cls(r, w)

    async def send(self, data: bytes) -> None:
        self.w.write(data)
        await self.w.drain()

    def close(self) -> None:
        self.w.close()


def rib_register(prefix: str, i: int) -> bytes:
    nm = ndn_name.from_uri(prefix)
    cp = bytes([0x68, len(nm) + 2, 0x07, len(nm)]) + nm
    return ndn_interest.encode(ndn_name.from_uri("/localhost/nfd/rib/register")
                               + ndn_name.generic(cp), nonce=i, lifetime_ms=1000)


async def still_serving(tmp: Path) -> None:
    proc = await ndn_app(tmp, tmp / "nfd.sock", "fetch.py", "/test/sim1/data/alive")
    lines = await finish(proc)
    assert "DATA /test/sim1/data/alive sim1:/test/sim1/data/alive" in lines, lines


def test_bad_apps_cannot_break_the_bridge(tmp_path: Path) -> None:
    """Malformed streams, an app vanishing mid-exchange, a registration storm, a PIT flood
    of Interests nobody answers: bounded, counted, and other apps keep being served."""

    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        cfg["trace"] = None
        async with bridge_with_boards(tmp_path, 1, app="probe_app", **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            sock = tmp_path / "nfd.sock"
            hub = bridge.hub
            # 1. garbage and an oversized length: that connection is closed, counted
            bad = await RawApp.connect(sock)
            await bad.send(b"\x05\xff\xff\xff\xff\xff\xff\xff\xff\xff" + b"x" * 100)
            assert await asyncio.wait_for(bad.r.read(), 5) == b""
            bad.close()
            await wait_until(lambda: bridge.ndn[0].bad_streams == 1, 30, "the bad stream count")
            garbage = await RawApp.connect(sock)
            await garbage.send(b"\x06\x03\x07\x01\x08")  # a Data whose Name is torn
            await wait_until(lambda: hub.counters["bad_packets"] >= 1, 10, "the torn Data")
            garbage.close()
            # 2. an app that asks for board data and vanishes before the answer
            for i in range(20):
                gone = await RawApp.connect(sock)
                await gone.send(ndn_interest.encode(
                    ndn_name.from_uri("/test/sim1/data/gone%d" % i), nonce=i, lifetime_ms=2000))
                gone.close()
            # 3. a registration storm: the FIB stays bounded, refusals are counted
            storm = await RawApp.connect(sock)
            for i in range(hub.fwd.max_fib + 50):
                await storm.send(rib_register("/storm/%d" % i, i))
            await wait_until(lambda: hub.counters["rib_refused"] >= 40, 20, "refusals")
            assert len(hub.fwd.fib) <= hub.fwd.max_fib
            storm.close()
            await wait_until(lambda: not any(p.startswith(ndn_name.from_uri("/storm"))
                                             for p in hub.fwd.fib), 10,
                             "the storm's routes to go with its face")
            # 4. a PIT flood: Interests towards an app that never answers
            sink = await RawApp.connect(sock)
            await sink.send(rib_register("/blackhole", 1))
            await wait_until(lambda: ndn_name.from_uri("/blackhole") in hub.fwd.fib, 10,
                             "the sink's route")
            flood = await RawApp.connect(sock)
            for i in range(hub.fwd.max_pit + 500):
                flood.w.write(ndn_interest.encode(ndn_name.from_uri("/blackhole/%d" % i),
                                                  nonce=i, lifetime_ms=1500))
            await flood.w.drain()
            await wait_until(lambda: hub.fwd.counters["pit_face_quota"] >= 400, 20,
                             "the per-face PIT bound")
            assert len(hub.fwd.pit) <= hub.fwd.max_pit
            # others are still served, and the PIT drains by itself
            await still_serving(tmp_path)
            await wait_until(lambda: len(hub.fwd.pit) < 10, 20, "the PIT to drain")
            flood.close()
            sink.close()
            await still_serving(tmp_path)

    asyncio.run(run())


def test_rib_commands_in_the_v03_signed_interest_form_and_trace_dissection(
        tmp_path: Path) -> None:
    """python-ndn sends the older signed-command name (tested above through every app);
    here the v0.3 form: ControlParameters component, ApplicationParameters, signature."""
    from pubmote_wire import data as ndn_data
    from pubmote_wire import tlv
    from pubmote_wire.signature import DigestSigner

    async def run() -> None:
        cfg = ndn_cfg(tmp_path)
        async with bridge_with_boards(tmp_path, 1, app="probe_app", **cfg) as bridge:
            await boards_registered(bridge, ["sim1"])
            app = await RawApp.connect(tmp_path / "nfd.sock")
            nm = ndn_name.from_uri("/v03/prefix")
            cp = bytes([0x68, len(nm) + 2, 0x07, len(nm)]) + nm
            for verb in ("register", "unregister"):
                cmd = ndn_interest.encode(
                    ndn_name.from_uri("/localhost/nfd/rib/" + verb) + ndn_name.generic(cp),
                    nonce=7, lifetime_ms=1000, app_params=b"", signer=DigestSigner())
                await app.send(cmd)
                reply = await asyncio.wait_for(app.r.read(4096), 5)
                d = ndn_data.decode_data(reply)
                typ, vs, ve = tlv.read_tlv(bytes(d.content))
                r = tlv.TLVReader(bytes(d.content), vs, ve)
                fields = {}
                while r.next():
                    fields[r.typ] = bytes(r.value())
                assert typ == 0x65 and fields[0x66] == b"\xc8" and fields[0x67] == b"OK"
                assert 0x68 in fields  # the ControlParameters python-ndn insists on
                routed = nm in bridge.hub.fwd.fib
                assert routed == (verb == "register")
            app.close()
        # the trace holds both directions; `pubmote dissect --trace` shows them
        exe = str(Path(sys.executable).parent / "pubmote")
        proc = await asyncio.create_subprocess_exec(
            exe, "dissect", "--trace", str(tmp_path / "trace.jsonl"),
            stdout=asyncio.subprocess.PIPE)
        out = (await asyncio.wait_for(proc.communicate(), 30))[0].decode()
        assert proc.returncode == 0
        assert "<- ndn:" in out and "-> ndn:" in out and "<- serial:sim1.tty" in out
        assert "/localhost/nfd/rib/register" in out and '"packet": "Data"' in out

    asyncio.run(run())
