"""Event time end to end (docs/protocols/event-time.md): simulated boards (the MicroPython
unix port) stamp each reading when the app publishes it, by their clock set from the
gateway's at registration; the bridge keeps that taken-time beside its arrival time. The
boards' ticks_ms() is the monotonic clock this process reads too, so the tests know when
each reading was truly taken. A gateway whose clock is an hour behind gives taken-times an
hour behind, within 50 ms; a reading held in a board's outbox while its bridge is stopped
arrives later with its own taken-time, its age telling it from a fresh one."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import cbor2
import pytest

from e2e import (
    BridgeProcess,
    Collector,
    boards_registered,
    bridge_with_boards,
    free_port,
    relayed_records,
    wait_until,
)
from pubmote.core.hub import Hub
from pubmote_wire import interest, name, notify

TOLERANCE_MS = 50
OFFSET_MS = -3_600_000  # the gateway's clock, an hour behind this host's
TICKS_MASK = (1 << 30) - 1  # the unix port's ticks_ms() period


def truth_ms(t_ms: int) -> float:
    """The wall-clock time (ms since 1970, this host's) of a board's ticks_ms() reading:
    the port's ticks are CLOCK_MONOTONIC's ms modulo 2**30, as time.monotonic() is."""
    mono = time.monotonic() * 1000
    wall = time.time() * 1000
    return wall - ((int(mono) - t_ms) & TICKS_MASK) - (mono - int(mono))


def test_ndn_python_repo_parser_skips_taken_time() -> None:
    # the bridge's notifies to NDN apps carry TakenTime (0xF2, non-critical): PubSub's own
    # NotifyAppParam parser reads the rest as before
    from ndn.encoding import Name
    from ndn_python_repo.utils.pubsub import NotifyAppParam

    buf = bytearray(200)
    n = notify.encode_notify_interest(buf, 0, name.from_uri("/t"), name.from_uri("/gw/gw1"),
                                      b"\x01\x02\x03\x04",
                                      taken=notify.taken_value(1_700_000_000_123))
    i = interest.decode_interest(bytes(buf[:n]))
    p = NotifyAppParam.parse(bytes(i.app_params or b""))
    assert Name.to_str(p.publisher_prefix) == "/gw/gw1"
    assert bytes(p.notify_nonce) == b"\x01\x02\x03\x04"
    assert notify.taken_ms(notify.parse_notify_interest(bytes(buf[:n]))[4]) == 1_700_000_000_123


async def _offset_run(tmp: Path, form: str
                      ) -> tuple[list[bytes], list[dict[str, Any]], int]:
    url = "tcp://127.0.0.1:%d" % free_port()
    topic = b"/test/sim1/clock|"
    async with bridge_with_boards(tmp, 1, app="clock_app", period_ms=100, sp_pub=[url],
                                  journal=str(tmp / "journal"), sim_keys=form == "keyed",
                                  extra={"batch": form == "timed-batches"}) as bridge:
        col = Collector(url, topic)
        try:
            await boards_registered(bridge, ["sim1"])
            lines = await col.wait_for(topic, 30, timeout_s=60)
            batched = bridge.hub.counters["batched"]
        finally:
            col.close()
    return lines, relayed_records(tmp / "journal", "/test/sim1/clock"), batched


@pytest.mark.timeout(180)
@pytest.mark.parametrize("form", ["timed-batches", "notifies", "keyed"])
def test_taken_time_is_the_gateways_clock_within_50ms(tmp_path: Path, form: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the gateway's clock an hour behind from the start, before any board registers. A
    # keyed board (HmacWithSha256 notifies) takes it from replies signed with its key
    monkeypatch.setattr(Hub, "clock_ms", lambda _self: int(time.time() * 1000) + OFFSET_MS)
    lines, recs, batched = asyncio.run(_offset_run(tmp_path, form))
    assert len(recs) >= 30, recs[:3]
    # timed BATCH records, or NDN notifies with TakenTime
    assert (batched > 0) == (form == "timed-batches")
    # every reading has the gateway's time, also the first ones, taken before the board
    # first registered: the outbox sends nothing before that, and a reading's time is
    # worked out from its stamp when it is sent
    errors, claimed = [], []
    for r in recs:
        reading = cbor2.loads(bytes.fromhex(r["payload"]))
        assert r["t_taken"] is not None, r
        errors.append(r["t_taken"] - (truth_ms(reading["t_ms"]) + OFFSET_MS))
        if reading["unc"] is not None:
            claimed.append(reading["unc"])
    # within 50 ms, or within what the board says its clock may be off: a loaded machine
    # can hold a registration's reply (the sync's round trip) for longer than 100 ms
    assert claimed and max(claimed) < 1000, claimed[:10]
    bound = max(TOLERANCE_MS, max(claimed) + 2)
    assert max(abs(e) for e in errors) <= bound, (bound, errors)
    # the SP subscriber got the same readings, in order
    seqs = [cbor2.loads(x.split(b"|", 1)[1])["seq"] for x in lines]
    assert seqs == sorted(seqs)


PERIOD_MS = 200
OUTAGE_S = 4.0
DEMO = b"/pubmote/demo/sim1/temperature|"


async def _outage(tmp: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    sim = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pubmote", "sim", "--boards", "1", "--dir", str(tmp),
        "--period-ms", str(PERIOD_MS), "--no-keys",
        # room for the whole outage however long a loaded machine stretches the restart
        "--app-config", json.dumps({"outbox_len": 512, "outbox_bytes": 65536}),
        stdout=asyncio.subprocess.DEVNULL)
    bridge = BridgeProcess(str(tmp / "sim1.tty"), "--journal", str(tmp / "journal"),
                           "--journal-max-age", "1")
    await bridge.start()
    col = Collector(bridge.sp_pub, DEMO)
    try:
        await col.wait_for(DEMO, 10, timeout_s=60)
        await bridge.stop()
        await asyncio.sleep(OUTAGE_S)  # the outage itself: its length is the scenario
        t_restart = time.time() * 1000
        await bridge.start()
        t_ready = time.time() * 1000
        # the held ones, then 5 s of fresh ones: taken 3 s or more after the bridge was up
        # (by then the backlog has drained, however slow the start-up)

        def fresh() -> int:
            taken = [cbor2.loads(x[len(DEMO):])["taken_ms"] for x in col.with_prefix(DEMO)]
            return sum(1 for t in taken if t is not None and t > t_ready + 3000)
        await wait_until(lambda: fresh() >= 25, 60, "25 fresh readings")
    finally:
        col.close()
        await bridge.stop()
        if sim.returncode is None:
            sim.terminate()
            await sim.wait()
    readings = [cbor2.loads(x[len(DEMO):]) for x in col.with_prefix(DEMO)]
    journal = relayed_records(tmp / "journal", DEMO[:-1].decode())
    return readings, journal, t_restart


@pytest.mark.timeout(240)
def test_reading_held_through_an_outage_keeps_its_taken_time_and_shows_late(
        tmp_path: Path) -> None:
    readings, journal, t_restart = asyncio.run(_outage(tmp_path))
    # the SP subscriber: the demo's payload carries the taken-time (the board's clock,
    # here the gateway's own: the same host), within 50 ms of when it was truly taken
    timed = [r for r in readings if r["taken_ms"] is not None]
    assert len(timed) >= len(readings) - 20, readings[:3]
    errs = [r["taken_ms"] - truth_ms(r["t_ms"]) for r in timed]
    assert max(abs(e) for e in errs) <= TOLERANCE_MS, errs
    # the journal: each reading's taken-time beside the bridge's arrival time
    by_seq: dict[int, dict[str, Any]] = {}
    for rec in journal:
        seq = cbor2.loads(bytes.fromhex(rec["payload"]))["seq"]
        by_seq.setdefault(seq, rec)  # the first arrival (a lost ack may repeat one)
    during = [r for r in by_seq.values() if r["t_taken"] is not None
              and r["t_taken"] < t_restart - 1000 and r["t_bridge"] > t_restart]
    # every reading of the outage's first seconds arrived after the restart, with its own
    # time: over a second old, which tells it from the fresh ones
    assert len(during) >= (OUTAGE_S - 1.5) * 1000 / PERIOD_MS, len(during)
    assert all(r["t_bridge"] - r["t_taken"] > 1000 for r in during)
    # the fresh ones: taken once the held ones had arrived (the restarted bridge's start-up
    # and the drain take seconds on a loaded machine, so the restart's own time says little)
    drained = max(r["t_bridge"] for r in during)
    fresh = [r for r in by_seq.values() if r["t_taken"] is not None
             and r["t_taken"] > drained + 2 * PERIOD_MS]
    ages = sorted(r["t_bridge"] - r["t_taken"] for r in fresh)
    # most arrive within milliseconds; a loaded machine may stall the odd one for a while
    assert len(ages) >= 10 and ages[len(ages) // 2] < 1000, ages
    for r in during + fresh:
        taken = cbor2.loads(bytes.fromhex(r["payload"]))["t_ms"]
        assert abs(r["t_taken"] - truth_ms(taken)) <= TOLERANCE_MS, r
