"""`pubmote sub URL PREFIX`: a board's CBOR readings, decoded, from a bridge's SP PUB."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from e2e import boards_registered, bridge_with_boards, free_port
from pubmote.cli.sub import format_line
from pubmote_wire import cbor

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def test_format_line() -> None:
    body = b"/t/x|" + cbor.dumps({"seq": 1, "celsius": 21.5})
    assert format_line(body, False) == '/t/x {"seq": 1, "celsius": 21.5}'
    assert json.loads(format_line(body, True)) == {
        "topic": "/t/x", "payload": {"seq": 1, "celsius": 21.5}, "hex": body[5:].hex()}
    assert format_line(b"/t/x|hello", False) == "/t/x hello"
    assert format_line(b"/t/x|\xff\xfe", False) == "/t/x fffe"


def test_format_line_marks_late_readings() -> None:
    # taken_ms (docs/protocols/event-time.md): a reading's age at arrival tells a late one
    body = b"/t/x|" + cbor.dumps({"seq": 1, "taken_ms": 1_700_000_000_000})
    fresh = format_line(body, False, now_ms=1_700_000_000_040)
    assert fresh == '/t/x {"seq": 1, "taken_ms": 1700000000000}'
    late = format_line(body, False, now_ms=1_700_000_012_500)
    assert late == fresh + " (late: taken 12.5 s before)"
    assert format_line(body, False, now_ms=1_700_000_012_500, late_ms=20_000) == fresh
    rec = json.loads(format_line(body, True, now_ms=1_700_000_012_500))
    assert rec["age_ms"] == 12_500 and rec["late"] is True
    rec = json.loads(format_line(body, True, now_ms=1_700_000_000_040))
    assert rec["age_ms"] == 40 and rec["late"] is False
    # no taken_ms, or not an int (null: the board had no synced clock): no age
    for v in ({"seq": 1}, {"taken_ms": None}, {"taken_ms": 1.5}, [1]):
        rec = json.loads(format_line(b"/t/x|" + cbor.dumps(v), True))
        assert "age_ms" not in rec and "late" not in rec


def test_sub_prints_decoded_readings(tmp_path: Path) -> None:
    async def run() -> None:
        url = "tcp://127.0.0.1:%d" % free_port()
        async with bridge_with_boards(tmp_path, 1, period_ms=200, sp_pub=[url]) as bridge:
            await boards_registered(bridge, ["sim1"])
            p = await asyncio.create_subprocess_exec(
                PUBMOTE, "sub", url, "/pubmote/demo/sim1/temperature", "--json", "--count", "2",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(p.communicate(), 60)
            assert p.returncode == 0, err
            lines = [json.loads(x) for x in out.decode().splitlines()]
            assert len(lines) == 2
            for rec in lines:
                assert rec["topic"] == "/pubmote/demo/sim1/temperature"
                assert set(rec["payload"]) == {"seq", "t_ms", "taken_ms", "celsius"}
                # the board's taken-time: a fresh reading, a few ms old (the same host)
                assert rec["late"] is False and abs(rec["age_ms"]) < 2000, rec
            assert lines[1]["payload"]["seq"] > lines[0]["payload"]["seq"]

    asyncio.run(run())


def test_sub_says_what_is_wrong() -> None:
    import subprocess

    p = subprocess.run([PUBMOTE, "sub", "http://x"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "tcp://HOST:PORT" in p.stderr
    port = free_port()  # reserved, nobody listens
    p = subprocess.run([PUBMOTE, "sub", "tcp://127.0.0.1:%d" % port], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 1 and "cannot connect" in p.stderr and "--sp-pub" in p.stderr
    assert "Traceback" not in p.stderr
