"""Hub -> board: the hub as the NDN notify publisher. Each subscriber's queue is drained
by one task, a few messages in flight; each is announced by a notify Interest (with the
publisher's TakenTime when it gave one), served when the board fetches it, and journaled
as delivered, nacked or dropped."""

from __future__ import annotations

import asyncio
import os

from pubmote.core.hub_base import OVERHEAD, SIGNER, HubBase
from pubmote.core.messages import Message
from pubmote.core.registry import BoardState
from pubmote_wire import name as ndn_name
from pubmote_wire import notify


class Delivery(HubBase):
    """Delivers queued messages to boards and NDN app subscriptions."""

    async def _deliver_loop(self, b: BoardState) -> None:
        sem = asyncio.Semaphore(self.window)
        while True:
            while not b.outbox:
                b.wake.clear()
                await b.wake.wait()
            if not b.face.up or b.down:  # down: its face may carry another board by now
                await asyncio.sleep(0.2)
                continue
            msg = b.outbox.popleft()
            await sem.acquire()
            self._spawn(self._deliver_one(b, msg, sem))

    async def _deliver_one(self, b: BoardState, msg: Message, sem: asyncio.Semaphore) -> None:
        nonce = os.urandom(4)
        try:
            topic = ndn_name.from_uri(msg.topic.decode())
            buf = bytearray(len(topic) + len(self.prefix) + len(msg.payload) + OVERHEAD)
            n = notify.encode_msg_data(buf, 0, self.prefix, topic, nonce, msg.payload,
                                       signer=SIGNER)
            self._serve[nonce] = bytes(buf[:n])
            # the publisher's taken-time rides on in the notify (docs/protocols/event-time.md)
            taken = notify.taken_value(msg.t_taken) if msg.t_taken is not None else None
            for _ in range(self.retries):
                nb = bytearray(len(topic) + len(self.prefix) + OVERHEAD + 10)
                n = notify.encode_notify_interest(nb, 0, topic, self.prefix, nonce,
                                                  lifetime_ms=self.timeout_ms, signer=SIGNER,
                                                  taken=taken)
                nacked: list[bool] = []
                if await self._express(bytes(nb[:n]), [b.face], nacked, owner=b.face) is not None:
                    b.counters["delivered"] += 1
                    self.journal_outcome(msg, b.name, "delivered")
                    return
                if not b.face.up:
                    break
            b.counters["deliver_failed"] += 1
            self.journal_outcome(msg, b.name, "nacked" if nacked else "dropped")
        finally:
            self._serve.pop(nonce, None)
            sem.release()
