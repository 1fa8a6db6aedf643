"""Fault-injection scenarios shared by the tests (tests/host/gateway/test_faults.py) and by
`make harden-report` (bench/harden/report.py, through tests/adversarial/scenarios): each
returns its figures as a dict and raises AssertionError if pubmote lost an acknowledged
message or starved a board; given a Measure (measure.py), it also takes the bridge's
memory around the fault and the board's recovery."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from measure import Bound, Measure

from e2e import (
    APPS,
    BridgeProcess,
    Collector,
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    journal_records,
    probe_report,
    wait_until,
)
from pubmote import procs
from pubmote.boards.fleet import SimFleet
from pubmote.core.auth import key_for_board
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config
from pubmote_wire import framing, interest, name, notify, sp
from pubmote_wire.hmac256 import HmacSigner


def sim_fleet(bridge: Bridge) -> SimFleet:
    """The bridge's simulated boards (bridge_with_boards starts them)."""
    assert isinstance(bridge.fleet, SimFleet)
    return bridge.fleet


def _seqs(lines: list[bytes]) -> set[int]:
    return {int(x.split(b"|")[1]) for x in lines}


def _acked(path: Path) -> set[int]:
    if not path.exists():
        return set()
    return {int(x) for x in path.read_text().split()}


async def _acked_arrive(col: Collector, prefix: bytes, acked_log: Path,
                        timeout_s: float = 30) -> tuple[set[int], list[int]]:
    """Once the board stopped publishing: wait until every message it logged as acked has
    reached the collector (or the deadline passed); return (acked, lost). Acked messages
    older than the collector's first one are left out (it subscribed after they were sent)."""
    def lost() -> tuple[set[int], list[int]]:
        received = _seqs(col.with_prefix(prefix))
        acked = {s for s in _acked(acked_log) if received and s >= min(received)}
        return acked, sorted(acked - received)

    deadline = time.monotonic() + timeout_s
    while lost()[1] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return lost()


SEQ = b"/test/sim1/seq|"


@contextlib.asynccontextmanager
async def _one_board_publishing(tmp: Path, m: Measure) -> AsyncIterator[tuple[Bridge, Any, Collector]]:
    """(bridge, board, collector): one board publishing every 20 ms (the seqs it saw acked
    logged in acked.log), collected from SP PUB; yielded once 5 arrived and m has its
    figures from before the fault."""
    url = "tcp://127.0.0.1:%d" % free_port()
    extra = {"seq_period_ms": 20, "acked_log": "acked.log"}
    async with bridge_with_boards(tmp, 1, app="probe_app", extra=extra, sp_pub=[url]) as bridge:
        await boards_registered(bridge, ["sim1"])
        assert bridge.fleet is not None
        col = Collector(url, SEQ)
        try:
            await col.wait_for(SEQ, 5)
            m.bound = Bound(bridge.cfg).sp_pub(1)
            m.before()
            yield bridge, sim_fleet(bridge).boards[0], col
        finally:
            col.close()


async def noisy_line(tmp: Path, *, seconds: float = 8, ber: float = 3e-4,
                     drop: float = 2e-3, measure: Measure | None = None) -> dict[str, Any]:
    """A serial line with a bit-error rate and lost bytes: every acked message arrives."""
    m = measure or Measure()
    async with _one_board_publishing(tmp, m) as (bridge, board, col):
        board.cable.bit_error_rate, board.cable.drop_rate = ber, drop
        await asyncio.sleep(seconds)  # the length of the noisy spell, not a wait
        board.cable.bit_error_rate = board.cable.drop_rate = 0.0
        # the link recovers (and the retries of what the noise hit go through): 100
        # more messages arrive, then the board stops, so nothing more is acked
        n, t0 = len(col.lines), time.monotonic()
        await col.wait_for(SEQ, n + 1, timeout_s=60)
        m.recovered(time.monotonic() - t0)
        await col.wait_for(SEQ, n + 100, timeout_s=60)
        m.sample()
        board.power_off()
        acked, lost = await _acked_arrive(col, SEQ, tmp / "acked.log")
        m.acked_figures(len(acked), lost)
        face = bridge.hub.boards["sim1"].face
        return {"bits_flipped": board.cable.counters["bits_flipped"],
                "bytes_lost": board.cable.counters["bytes_lost"],
                "bad_frames_at_bridge": face.bad_frames(), "acked": len(acked),
                "acked_lost": len(lost), "lost_examples": lost[:10]}


async def resets_mid_publish(tmp: Path, *, resets: int = 5,
                             measure: Measure | None = None) -> dict[str, Any]:
    """Power cut at random moments while a board publishes every 20 ms (soft state gone
    with it): every message the board saw acked before the cut arrives."""
    m = measure or Measure()
    rng = random.Random(7)
    async with _one_board_publishing(tmp, m) as (_, board, col):
        for _ in range(resets):
            await asyncio.sleep(0.5 + rng.random())
            board.power_off()
            await asyncio.sleep(0.2)
            board.start()
            n, t0 = len(col.lines), time.monotonic()
            await col.wait_for(SEQ, n + 1, timeout_s=20)
            m.recovered(time.monotonic() - t0)  # from the power coming back
            await col.wait_for(SEQ, n + 5, timeout_s=20)
        m.sample()
        board.power_off()
        acked, lost = await _acked_arrive(col, SEQ, tmp / "acked.log")
        m.acked_figures(len(acked), lost)
        return {"resets": resets, "acked": len(acked), "acked_lost": len(lost),
                "lost_examples": lost[:10]}


async def slow_subscriber(tmp: Path, *, after: int = 500,
                          measure: Measure | None = None) -> dict[str, Any]:
    """An SP subscriber that never reads: its buffer is bounded and its drops counted; a
    second subscriber gets every message."""
    m = measure or Measure()
    url = "tcp://127.0.0.1:%d" % free_port()
    extra = {"seq_period_ms": 2, "pad": 600}
    async with bridge_with_boards(tmp, 1, app="probe_app", extra=extra, sp_pub=[url],
                                  sp_buffer_bytes=32 * 1024) as bridge:
        await boards_registered(bridge, ["sim1"])
        host, port = url[len("tcp://"):].rsplit(":", 1)
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect((host, int(port)))
        slow.sendall(sp.header(sp.SUB))
        col = Collector(url, b"/test/sim1/seq|")
        try:
            await col.wait_for(b"/test/sim1/seq|", 5)
            m.bound = Bound(bridge.cfg).sp_pub(2)
            m.before()
            ep = bridge.sp[0]
            await wait_until(lambda: ep.counters["dropped"] > 0, 60,
                             "the slow subscriber's buffer to overflow")
            # while it keeps dropping for the slow one, the fast one gets `after` more
            n, dropped = len(col.lines), ep.counters["dropped"]
            await col.wait_for(b"/test/sim1/seq|", n + after, timeout_s=60)
            await wait_until(lambda: ep.counters["dropped"] > dropped + 10, 60,
                             "more drops for the slow subscriber")
            m.sample()
        finally:
            col.close()
            slow.close()
        seqs = sorted(_seqs(col.lines))
        gaps = (seqs[-1] - seqs[0] + 1) - len(seqs) if seqs else -1
        return {"dropped_for_slow": bridge.sp[0].counters["dropped"],
                "delivered_to_fast": len(seqs), "fast_gaps": gaps}


async def flood_from_one_board(tmp: Path, *, seconds: float = 6,
                               measure: Measure | None = None) -> dict[str, Any]:
    """One board publishes as fast as the bridge acks; another, every 50 ms, keeps its
    share: none of its publishes fails and every acked one arrives."""
    m = measure or Measure()
    url = "tcp://127.0.0.1:%d" % free_port()
    async with bridge_with_boards(tmp, 2, app="probe_app", sp_pub=[url]) as bridge:
        await boards_registered(bridge, ["sim1", "sim2"])
        assert bridge.fleet is not None
        flood, calm = sim_fleet(bridge).boards
        # our subscriber takes only the calm board's topic: nng's SUB queue would drop under
        # the flood, and that loss would be ours, not the bridge's (it counts the flood)
        col = Collector(url, b"/test/sim2/seq|")
        try:
            # sim1 floods: restart it with the benchmark's 8-lane publisher
            flood.power_off()
            flood.config.update({"app": "bench_pub", "lanes": 8})
            flood.app_dir = Path(__file__).resolve().parents[2] / "bench" / "bridge"
            flood.start()
            calm.power_off()
            calm.config.update({"seq_period_ms": 50, "acked_log": "acked-calm.log"})
            calm.start()
            await wait_until(lambda: _count(bridge, b"/bench/sim1/data") >= 100, 30, "the flood")
            await col.wait_for(b"/test/sim2/seq|", 5)
            flood_start = _count(bridge, b"/bench/sim1/data")
            m.bound = Bound(bridge.cfg).sp_pub(1).boards()
            m.before()
            rss_start = procs.status_kb("VmRSS") or -1
            t0 = time.monotonic()
            await asyncio.sleep(seconds)
            elapsed = time.monotonic() - t0
            flood_msgs = _count(bridge, b"/bench/sim1/data") - flood_start
            rss_end = procs.status_kb("VmRSS") or -1
            m.sample()
            flood.power_off()
            calm.power_off()
            acked, lost = await _acked_arrive(col, b"/test/sim2/seq|", tmp / "acked-calm.log")
            m.acked_figures(len(acked), lost)
        finally:
            col.close()
        calm_info = bridge.hub.board("sim2")
        assert calm_info is not None
        return {"flood_msgs_per_s": round(flood_msgs / elapsed), "calm_acked": len(acked),
                "calm_lost": len(lost), "lost_examples": lost[:10],
                "sp_dropped": bridge.sp[0].counters["dropped"],
                "calm_failed": calm_info.counters["fetch_failed"],
                "seconds": round(elapsed), "rss_start_kb": rss_start, "rss_end_kb": rss_end}


async def bridge_killed_and_restarted(tmp: Path, *, after: int = 20,
                                      measure: Measure | None = None) -> dict[str, Any]:
    """A bridge in its own process, killed (SIGKILL) while a board publishes every 50 ms,
    then started again: every message the board saw acked arrives (`after` of them after
    the restart). The recovery: from the restart to the first message after it."""
    m = measure or Measure()
    exe = str(Path(sys.executable).parent / "pubmote")
    sim = await asyncio.create_subprocess_exec(
        exe, "sim", "--boards", "1", "--dir", str(tmp), "--app", "probe_app",
        "--app-dir", str(APPS), "--app-config", '{"seq_period_ms": 50}', "--no-keys",
        stdout=asyncio.subprocess.PIPE)
    journal = tmp / "journal"
    bridge = BridgeProcess(str(tmp / "sim1.tty"), "--journal", str(journal))
    await bridge.start()
    col = Collector(bridge.sp_pub, b"/test/sim1/")
    pub = Publisher(bridge.sp_sub)
    try:
        await col.wait_for(b"/test/sim1/seq|", 20, timeout_s=30)
        m.watch(bridge.pid)
        m.before()
        m.sample()
        await bridge.stop(signal.SIGKILL)
        at_kill = len(col.with_prefix(b"/test/sim1/seq|"))
        await asyncio.sleep(1.0)
        restarted = time.time() * 1000
        await bridge.start()
        t0 = time.monotonic()
        m.watch(bridge.pid)
        await col.wait_for(b"/test/sim1/seq|", at_kill + 1, timeout_s=30)
        m.recovered(time.monotonic() - t0)
        await col.wait_for(b"/test/sim1/seq|", at_kill + after, timeout_s=30)
        report = await probe_report(pub, col, "sim1", resend=True)
        m.sample()
    finally:
        col.close()
        pub.close()
        await bridge.stop()
        if sim.returncode is None:
            sim.terminate()
            await sim.wait()
    received = _seqs(col.with_prefix(b"/test/sim1/seq|"))
    sent = int(report["sent"])  # type: ignore[call-overload]
    failed = set(report["failed"])  # type: ignore[call-overload]
    # SP PUB drops what is published before a subscriber connects: count from the first
    # message our subscriber saw; the last few may still be in flight at the report
    acked = set(range(min(received), sent)) - failed
    # the new bridge may take the board's resent message before the subscriber has
    # redialled it: SP PUB sends only to connected subscribers (docs/guarantees.md), so the
    # journal must show it relayed to no subscriber, before the first one it delivered
    unheard = relayed_unheard(journal, "/test/sim1/seq", after_ms=restarted)
    missing = sorted(s for s in acked
                     if s not in received and s not in unheard and s < sent - 5)
    m.acked_figures(len(acked), missing)
    assert len(acked) >= 30  # the scenario ran: messages before and after the restart
    assert not missing, "acked but never delivered: %s" % missing[:20]
    return {"kills": 1, "acked": len(acked), "acked_lost": len(missing),
            "before_resubscribed": len(unheard & acked)}


def relayed_unheard(journal: Path, topic: str, *, after_ms: float) -> set[int]:
    """The payloads (seq numbers) of topic's messages a bridge started at after_ms relayed
    before it delivered any of them to an SP subscriber: while none was connected yet."""
    relayed: dict[float, int] = {}
    delivered: set[float] = set()
    for rec in journal_records(journal):
        if rec.get("topic") != topic or rec["t_bridge"] < after_ms:
            continue
        if rec["egress"] is None:
            relayed[rec["t_bridge"]] = int(bytes.fromhex(rec["payload"]).split(b"|")[0])
        elif rec["egress"].startswith("sp:") and rec["outcome"] == "delivered":
            delivered.add(rec["t_bridge"])
    first = min(delivered, default=float("inf"))
    return {seq for t, seq in relayed.items() if t < first and t not in delivered}


def _count(bridge: Any, topic: bytes) -> int:
    st = bridge.hub.topic_stats().get(topic)
    return st.count if st is not None else 0



async def auth_realm(tmp_path: Path) -> dict[str, Any]:
    """Boards with the right key, none and a wrong key publish into a signed realm; a
    replayed, a stale and a forged notify are injected into the good board's line."""
    keys = tmp_path / "keys.json"
    k1 = key_for_board(str(keys), "sim1")
    key_for_board(str(keys), "sim3")
    wrong = bytes(32)
    result: dict[str, Any] = {}
    fleet = SimFleet(3, tmp_path / "sim", app="probe_app", app_dir=APPS,
                         extra={"seq_period_ms": 100})
    fleet.boards[0].config["key"] = k1.hex()
    fleet.boards[2].config["key"] = wrong.hex()  # sim3 deployed with a stale key
    url = "tcp://127.0.0.1:%d" % free_port()
    cfg = load_config(None, {"serial": [b.port for b in fleet.boards], "sp_pub": [url],
                             "keys": str(keys), "require_signed": ["/test"],
                             # sim2, without a key, registers: its notifies are the
                             # unsigned ones the signed realm refuses
                             "allow_anonymous_boards": True,
                             "trace": str(tmp_path / "trace.jsonl"), "timeout_ms": 1000})
    fleet.start()
    try:
        async with Bridge(cfg) as bridge:
            hub = bridge.hub
            auth = hub.auth
            assert auth is not None
            col = Collector(url, b"/test/")
            try:
                await col.wait_for(b"/test/sim1/seq|", 10, timeout_s=30)
                await wait_until(lambda: auth.rejected["unsigned"] >= 3, 20, "unsigned")
                await wait_until(lambda: auth.rejected["register_rejected"] >= 1, 20,
                                 "sim3's registration to be refused")
                # replay: a notify sim1 really sent, written into its line again
                face = next(f for f in bridge.faces if f.label == "serial:sim1.tty")
                old = _last_notify(tmp_path / "trace.jsonl", "serial:sim1.tty")
                before = auth.rejected["replayed"]
                fleet.boards[0].cable.inject(1, framing.encode(old))
                await wait_until(lambda: auth.rejected["replayed"] > before, 10, "replay")
                # stale: properly signed with sim1's key, but two minutes old
                stale = _notify(k1, time_ms=_now_ms() - 120_000)
                fleet.boards[0].cable.inject(1, framing.encode(stale))
                await wait_until(lambda: auth.rejected["stale"] >= 1, 10, "stale")
                # a forged one: sim1's name, another key
                forged = _notify(wrong, time_ms=_now_ms())
                before = auth.rejected["bad_signature"]
                fleet.boards[0].cable.inject(1, framing.encode(forged))
                await wait_until(lambda: auth.rejected["bad_signature"] > before, 10,
                                 "forged")
                assert face.up
            finally:
                col.close()
            got = col.with_prefix(b"/test/")
            sim3 = hub.board("sim3")
            result.update(rejected=dict(auth.rejected), accepted=auth.accepted,
                          delivered=[x.split(b"|")[0] for x in got],
                          sim3_published=sim3.counters["published"] if sim3 is not None else 0,
                          keys=[k1.hex(), wrong.hex()])
    finally:
        fleet.stop()
    return result


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _notify(key: bytes, time_ms: int) -> bytes:
    buf = bytearray(400)
    n = notify.encode_notify_interest(
        buf, 0, name.from_uri("/test/sim1/forged"), name.from_uri("/pubmote/node/sim1"),
        b"\x01\x02\x03\x04", signer=HmacSigner(key), sig_nonce=b"12345678",
        sig_time_ms=time_ms)
    return bytes(buf[:n])


def _last_notify(trace: Path, face: str) -> bytes:
    """The newest signed notify sim1 sent: one the bridge accepted (the first ones may have
    come before sim1 registered, refused as unregistered: their replay is no replay)."""
    for line in reversed(trace.read_text().splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the line being written
        if rec["face"] != face or rec["dir"] != "in":
            continue
        pkt = bytes.fromhex(rec["hex"])
        try:
            topic, _, _, _, i = notify.parse_notify_interest(pkt)
        except ValueError:
            continue
        if name.to_uri(bytes(topic)) == "/test/sim1/seq" and i.sig_nonce is not None:
            assert interest.decode_interest(pkt).sig_type == 4
            return pkt
    raise AssertionError("no signed notify from sim1 in the trace")


__all__ = ["APPS", "auth_realm", "flood_from_one_board", "noisy_line", "resets_mid_publish",
           "slow_subscriber"]
