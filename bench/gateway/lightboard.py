"""A light-weight virtual board for the gateway bench: the least of the board protocol a
publisher needs, written with the shared codec (pubmote_wire; its link framing through the
bridge's CPython fast path, pubmote.faces.fastframe: the same bytes) the way the bench's
MQTT client (vboards.MqttClient) is the least of MQTT 3.1.1 a QoS 1 publisher needs.

It registers over TCP offering link batches (docs/protocols/control.md and link-batch.md),
then publishes each message as a one-record BATCH frame and waits for the ACKS frame that
names its seq: one message in flight, as the MQTT client waits for each PUBACK. No
subscriptions, keepalives or reconnects: a bench run is seconds long."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pubmote.faces import fastframe
from pubmote_wire import batch, control
from pubmote_wire import data as ndn_data
from pubmote_wire import name as ndn_name


class LightBoard:
    def __init__(self, host: str, port: int, board: str) -> None:
        self.host, self.port, self.board = host, port, board
        self.epoch = int.from_bytes(os.urandom(4), "big") & batch.SEQ_MASK
        self.seq = 0
        self.acks: dict[int, asyncio.Future[None]] = {}
        self.registered: asyncio.Future[int] | None = None  # the batch form taken (0: none)
        self.dec = fastframe.Deframer(1024)
        self.buf = bytearray(512)
        self.topics: dict[str, bytes] = {}

    async def connect(self) -> None:
        self.r, self.w = await asyncio.open_connection(self.host, self.port)
        self.registered = asyncio.get_running_loop().create_future()
        self.reader = asyncio.create_task(self._read())
        params = control.register_params(self.board, "/pubmote/node/" + self.board, [], [],
                                         True, None, None)
        buf = bytearray(len(params) + 256)
        n = control.encode_register(buf, 0, self.board.encode(), params, -1, 4000, None,
                                    None, None)
        self.w.write(fastframe.encode(memoryview(buf)[:n]))
        if not await asyncio.wait_for(self.registered, 20):
            raise ConnectionError("%s: the bridge did not take link batches" % self.board)

    async def _read(self) -> None:
        while True:
            chunk = await self.r.read(1 << 16)
            if not chunk:
                return
            for pkt in self.dec.feed(chunk):
                self._on_packet(pkt)

    def _on_packet(self, pkt: Any) -> None:
        if pkt[0] == batch.ACKS:
            for i in range(batch.ack_runs(pkt)):
                first, count = batch.ack_run(pkt, i)
                for seq in range(first, first + count):
                    f = self.acks.pop(seq, None)
                    if f is not None and not f.done():
                        f.set_result(None)
        elif pkt[0] == 0x06 and self.registered is not None and not self.registered.done():
            d = ndn_data.decode_data(bytes(pkt))
            if d.name is not None and d.content is not None \
                    and bytes(d.name).startswith(control.REGISTER):
                self.registered.set_result(control.decode_reply(bytes(d.content))[2])

    async def publish(self, topic: str, payload: bytes) -> bool:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = ndn_name.from_uri(topic)
        seq = self.seq
        self.seq = (seq + 1) & batch.SEQ_MASK
        buf = self.buf
        off = batch.add_record(buf, batch.begin(buf, batch.BATCH, self.epoch), seq, t, payload)
        f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks[seq] = f
        self.w.write(fastframe.encode(memoryview(buf)[:off]))
        try:
            await asyncio.wait_for(f, 10)
        except TimeoutError:
            self.acks.pop(seq, None)
            return False
        return True
