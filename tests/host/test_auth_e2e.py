"""Board authentication end to end: simulated boards with the right key, no key and a
wrong key publish into a realm that requires signing; replayed and stale packets injected
into a line are refused; keys never reach the logs."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from e2e import APPS, Collector, free_port, wait_until
from pubmote_bridge import sim
from pubmote_bridge.auth import key_for_board
from pubmote_bridge.bridge import Bridge, load_config
from pubmote_wire import framing, interest, name, notify
from pubmote_wire.signature import HmacSigner


def test_only_signed_fresh_packets_of_known_boards_enter_a_signed_realm(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    keys = tmp_path / "keys.json"
    k1 = key_for_board(str(keys), "sim1")
    k3 = key_for_board(str(keys), "sim3")
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    wrong = bytes(32)

    async def run() -> None:
        fleet = sim.SimFleet(3, tmp_path / "sim", app="probe_app", app_dir=APPS,
                             extra={"seq_period_ms": 100})
        fleet.boards[0].config["key"] = k1.hex()
        fleet.boards[2].config["key"] = wrong.hex()  # sim3 deployed with a stale key
        url = "tcp://127.0.0.1:%d" % free_port()
        cfg = load_config(None, {"serial": [b.port for b in fleet.boards], "sp_pub": [url],
                                 "keys": str(keys), "require_signed": ["/test"],
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
                    old = _first_notify(tmp_path / "trace.jsonl", "serial:sim1.tty")
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
                assert got and all(x.startswith(b"/test/sim1/seq|") for x in got), got[:5]
                assert b"/test/sim1/forged|" not in b"".join(got)
                assert "sim3" not in hub.boards or hub.boards["sim3"].counters["published"] == 0
        finally:
            fleet.stop()

    asyncio.run(run())
    text = caplog.text
    assert "rejected notify from board sim2: unsigned (1 so far)" in text
    assert "rejected registration from board sim3: bad_signature" in text
    for key in (k1, k3, wrong):
        assert key.hex() not in text and key.hex().upper() not in text


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


def _first_notify(trace: Path, face: str) -> bytes:
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
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
