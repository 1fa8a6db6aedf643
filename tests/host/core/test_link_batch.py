"""Link batches (docs/protocols/link-batch.md) between a simulated board and the bridge: a
board and bridge that both offer them agree at registration and the board's messages
arrive in batches; a bridge that refuses them gets NDN notifies; a record sent again (same
epoch and seq) is acked again but relayed once; a malformed batch is dropped whole."""

from __future__ import annotations

import asyncio
from pathlib import Path

from e2e import Collector, boards_registered, bridge_with_boards, free_port, wait_until
from pubmote_wire import batch, framing, name

DUP_TOPIC = b"/test/sim1/dup"


def _batch_frame(epoch: int, seq: int, topic: str, payload: bytes) -> bytes:
    buf = bytearray(100)
    off = batch.begin(buf, batch.BATCH, epoch)
    off = batch.add_record(buf, off, seq, name.from_uri(topic), payload)
    return framing.encode(bytes(buf[:off]))


def test_batches_agreed_and_relayed_once(tmp_path: Path) -> None:
    url = "tcp://127.0.0.1:%d" % free_port()

    async def go() -> None:
        async with bridge_with_boards(tmp_path, 1, app="probe_app", sp_pub=[url],
                                      extra={"seq_period_ms": 20}) as bridge:
            col = Collector(url, b"/test/sim1/")
            try:
                await boards_registered(bridge, ["sim1"])
                await col.wait_for(b"/test/sim1/seq|", 20)
                hub = bridge.hub
                await wait_until(lambda: hub.counters["batched"] >= 20, 20,
                                 "the board's messages to come in batches")
                # (a message published before the registration is answered is a notify)
                assert hub.counters["inline"] < 5, hub.counters
                # the same record twice, as a board sends it when its ack was lost
                assert bridge.fleet is not None
                cable = bridge.fleet.boards[0].cable
                frame = _batch_frame(0x123456, 7, DUP_TOPIC.decode(), b"once")
                cable.inject(1, frame)
                await wait_until(lambda: hub.boards["sim1"].counters["duplicates"] == 0
                                 and len(col.with_prefix(DUP_TOPIC + b"|")) == 1, 10,
                                 "the record to be relayed")
                cable.inject(1, frame)
                await wait_until(lambda: hub.boards["sim1"].counters["duplicates"] == 1, 10,
                                 "the record sent again to be acked as a duplicate")
                # a torn batch (cut inside its payload, framed with a good CRC) is dropped
                bad = bytearray(100)
                off = batch.begin(bad, batch.BATCH, 0x123456)
                off = batch.add_record(bad, off, 8, name.from_uri("/test/sim1/torn"), b"xyz")
                bad_before = hub.counters["bad_packets"]
                cable.inject(1, framing.encode(bytes(bad[: off - 1])))
                await wait_until(lambda: hub.counters["bad_packets"] == bad_before + 1, 10,
                                 "the torn batch to be counted")
                # later messages still flow, and the duplicate never reached the SUB twice
                n = len(col.with_prefix(b"/test/sim1/seq|"))
                await col.wait_for(b"/test/sim1/seq|", n + 5)
                assert len(col.with_prefix(DUP_TOPIC + b"|")) == 1
                assert not col.with_prefix(b"/test/sim1/torn|")
            finally:
                col.close()

    asyncio.run(go())


def test_a_bridge_that_refuses_batches_gets_notifies(tmp_path: Path) -> None:
    url = "tcp://127.0.0.1:%d" % free_port()

    async def go() -> None:
        async with bridge_with_boards(tmp_path, 1, app="probe_app", sp_pub=[url],
                                      extra={"seq_period_ms": 20}) as bridge:
            # every registration's answer restates the choice: even a board that was
            # answered yes before this line is told no at its next keepalive
            bridge.hub.batch_link = False
            col = Collector(url, b"/test/sim1/seq|")
            try:
                await boards_registered(bridge, ["sim1"])
                hub = bridge.hub
                await wait_until(lambda: hub.counters["inline"] >= 20, 30,
                                 "the board to publish NDN notifies")
                n = hub.counters["batched"]
                await col.wait_for(b"/test/sim1/seq|", len(col.lines) + 10)
                assert hub.counters["batched"] == n, hub.counters
            finally:
                col.close()

    asyncio.run(go())
