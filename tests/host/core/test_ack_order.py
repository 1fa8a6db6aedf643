"""An ack means "handed on": the bytes of a message reach every connected SP subscriber's
socket before the ack that lets its board forget it leaves, on every path a board (or an
NDN app) publishes by: a notify with the message inline, a notify whose message the hub
fetches, a duplicate notify, and a link batch. One timeline records every write, to the
subscriber's socket and to the board's face, so any reordering shows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hub_face import StubFace

from e2e import free_port
from pubmote.core.hub import Hub
from pubmote.faces.sp import SpConn, SpEndpoint
from pubmote_wire import batch, control, interest, notify, sp
from pubmote_wire import data as ndn_data
from pubmote_wire import name as ndn_name

PUBLISHER = "/pubmote/node/b1"


class Timeline:
    """Every write, in order: ("sp", bytes) to the subscriber, ("face", bytes) to the board."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bytes]] = []


class SocketOfSubscriber(asyncio.Transport):
    """The transport of one SP subscriber: what the bridge writes is put on the timeline."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__()
        self.timeline = timeline

    def write(self, data: Any) -> None:
        self.timeline.events.append(("sp", bytes(data)))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, key: str, default: Any = None) -> Any:
        return default

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class BoardFace(StubFace):
    """A board's face: what the hub sends it goes on the timeline; it answers the hub's
    fetch of its message (a msg Interest) a loop turn later, as a link would."""

    def __init__(self, hub: Hub, timeline: Timeline) -> None:
        super().__init__(face_id=7, kind="serial", label="serial:fake")
        self.hub = hub
        self.timeline = timeline
        self.serves: dict[bytes, bytes] = {}  # msg name -> its Data

    def send_packet(self, pkt: bytes) -> None:
        self.timeline.events.append(("face", pkt))
        if pkt[:1] == b"\x05":
            nm = bytes(interest.decode_interest(pkt).name)
            reply = self.serves.get(nm)
            if reply is not None:
                asyncio.get_running_loop().call_soon(self.hub.on_packet, self, reply)


def _msg_data(topic: str, nonce: bytes, payload: bytes) -> bytes:
    buf = bytearray(300)
    n = notify.encode_msg_data(buf, 0, ndn_name.from_uri(PUBLISHER), ndn_name.from_uri(topic),
                               nonce, payload)
    return bytes(buf[:n])


def _notify(topic: str, nonce: bytes, inline: bytes | None) -> bytes:
    buf = bytearray(600)
    n = notify.encode_notify_interest(buf, 0, ndn_name.from_uri(topic),
                                      ndn_name.from_uri(PUBLISHER), nonce, inline=inline)
    return bytes(buf[:n])


def _register(board: str, offers_batch: bool) -> bytes:
    params = control.register_params(board, PUBLISHER, [b""], [], offers_batch, None, None)
    buf = bytearray(300)
    n = control.encode_register(buf, 0, board.encode(), params, 1, 2000, None, None, None)
    return bytes(buf[:n])


def _is_ack(pkt: bytes) -> bool:
    if pkt[:1] == b"\x06":
        return b"\x08\x06notify" in bytes(ndn_data.decode_data(pkt).name)
    return pkt[:1] == bytes([batch.ACKS])


async def _bridge_parts() -> tuple[Hub, SpEndpoint, Timeline, BoardFace]:
    hub = Hub(gateway="gw")
    ep = SpEndpoint(hub, "tcp://127.0.0.1:%d" % free_port(), sp.PUB)
    await ep.start()
    timeline = Timeline()
    conn = SpConn(ep)
    conn.connection_made(SocketOfSubscriber(timeline))
    conn.data_received(sp.header(sp.SUB))  # past the SP handshake: a connected subscriber
    face = BoardFace(hub, timeline)
    hub.face_state(face)
    timeline.events.clear()  # the SP header and the hello: not part of the story
    return hub, ep, timeline, face


async def _check_order(timeline: Timeline, payloads: list[bytes], acks: int) -> None:
    """Each payload reached the subscriber's socket before any ack that covers it left."""
    await _until(lambda: all(any(p in b for w, b in timeline.events if w == "sp")
                             for p in payloads))
    first_ack = [i for i, (where, pkt) in enumerate(timeline.events)
                 if where == "face" and _is_ack(pkt)]
    assert len(first_ack) == acks, timeline.events
    for p in payloads:
        at = [i for i, (where, b) in enumerate(timeline.events) if where == "sp" and p in b]
        assert at, "payload %r never reached the subscriber" % p
        assert at[0] < first_ack[0], "acked before it was written to the subscriber: %s" % (
            [(w, b[:40]) for w, b in timeline.events])


async def _until(pred: Any) -> None:
    for _ in range(200):
        if pred():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


@pytest.mark.parametrize("how", ["inline", "fetched", "duplicate"])
def test_a_notify_is_acked_after_the_subscriber_write(how: str) -> None:
    async def run() -> None:
        hub, ep, timeline, face = await _bridge_parts()
        try:
            topic, nonce, payload = "/t/x", b"\x00\x00\x00\x01", b"reading-1"
            data = _msg_data(topic, nonce, payload)
            face.serves[notify.msg_name(ndn_name.from_uri(PUBLISHER), ndn_name.from_uri(topic),
                                        nonce)] = data
            pkt = _notify(topic, nonce, data if how != "fetched" else None)
            hub.on_packet(face, pkt)
            if how == "duplicate":  # the board's retransmission, in the same turn
                await _until(lambda: any(_is_ack(p) for w, p in timeline.events if w == "face"))
                hub.on_packet(face, pkt)
                await _until(lambda: sum(_is_ack(p) for w, p in timeline.events
                                         if w == "face") == 2)
            else:
                await _until(lambda: any(_is_ack(p) for w, p in timeline.events if w == "face"))
            await _check_order(timeline, [payload], 2 if how == "duplicate" else 1)
        finally:
            await ep.close(flush_s=0)
            await hub.close()

    asyncio.run(run())


@pytest.mark.parametrize("boards", [1, 3])
def test_a_link_batch_is_acked_after_the_subscriber_write(boards: int) -> None:
    """One board's batch, and several boards' batches handled in one loop turn."""
    async def run() -> None:
        hub, ep, timeline, face = await _bridge_parts()
        faces = [face] + [BoardFace(hub, timeline) for _ in range(boards - 1)]
        try:
            for i, f in enumerate(faces):
                f.face_id = 7 + i
                hub.face_state(f)
                hub.on_packet(f, _register("b%d" % i, True))
                assert hub.boards["b%d" % i].batch
            timeline.events.clear()
            payloads = []
            for i, f in enumerate(faces):
                buf = bytearray(400)
                off = batch.begin(buf, batch.BATCH, 0x1234 + i)
                for seq in range(3):
                    p = b"b%d-record-%d" % (i, seq)
                    payloads.append(p)
                    off = batch.add_record(buf, off, seq, ndn_name.from_uri("/t/batch"), p)
                hub.on_packet(f, bytes(buf[:off]))
            await _until(lambda: sum(_is_ack(p) for w, p in timeline.events
                                     if w == "face") == boards)
            await _check_order(timeline, payloads, boards)
        finally:
            await ep.close(flush_s=0)
            await hub.close()

    asyncio.run(run())


def test_a_stopping_hub_acks_nothing_new_and_still_sends_earlier_acks() -> None:
    async def run() -> None:
        hub, ep, timeline, face = await _bridge_parts()
        try:
            early = _msg_data("/t/x", b"\x00\x00\x00\x02", b"before-stop")
            hub.on_packet(face, _notify("/t/x", b"\x00\x00\x00\x02", early))
            await asyncio.sleep(0)  # the notify's task ran: relayed, its ack waits the flush
            hub.stop_intake()
            late = _msg_data("/t/x", b"\x00\x00\x00\x03", b"after-stop")
            hub.on_packet(face, _notify("/t/x", b"\x00\x00\x00\x03", late))
            hub.flush_relays()
            await asyncio.sleep(0.05)
            await _check_order(timeline, [b"before-stop"], 1)
            assert not any(b"after-stop" in b for _, b in timeline.events)
        finally:
            await ep.close(flush_s=0)
            await hub.close()

    asyncio.run(run())
