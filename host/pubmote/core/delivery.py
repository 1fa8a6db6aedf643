"""Hub -> board: the hub as the NDN notify publisher. Each subscriber's queue is drained
by one task, a few messages in flight; each is announced by a notify Interest, served
when the board fetches it, and journaled as delivered, nacked or dropped."""

from __future__ import annotations

import asyncio
import contextlib
import os

from pubmote.core.exchange import OVERHEAD, SIGNER, Exchange
from pubmote.core.messages import Message
from pubmote.core.records import JournalFeed
from pubmote.core.registry import BoardState
from pubmote.core.sleepers import SleepSessions
from pubmote.core.tasks import TaskSet
from pubmote_wire import name as ndn_name
from pubmote_wire import notify


class Delivery:
    """Delivers queued messages to boards and NDN app subscriptions, and serves each
    message's Data while its notify is out."""

    def __init__(self, *, prefix: bytes, exchange: Exchange, feed: JournalFeed,
                 tasks: TaskSet, retries: int, window: int, sleepers: SleepSessions) -> None:
        self._prefix = prefix
        self._exchange = exchange
        self._feed = feed
        self._tasks = tasks
        self._retries = retries
        self._window = window
        self._sleepers = sleepers
        self._serve: dict[bytes, bytes] = {}  # our NotifyNonce -> msg Data, until acked

    def start(self, b: BoardState) -> asyncio.Task[None]:
        """The task that drains b's queue, until cancelled."""
        return self._tasks.spawn(self._loop(b))

    def served(self, nonce: bytes) -> bytes | None:
        """The message Data announced with our NotifyNonce `nonce`, while it is out."""
        return self._serve.get(nonce)

    async def _loop(self, b: BoardState) -> None:
        sem = asyncio.Semaphore(self._window)
        while True:
            while not b.outbox:
                b.wake.clear()
                await b.wake.wait()
            # down: its face may carry another board by now; asleep: held until it wakes
            if not b.face.up or b.down or b.asleep_since is not None:
                b.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(b.wake.wait(), 0.2)
                continue
            msg = b.outbox.popleft()
            await sem.acquire()
            self._tasks.spawn(self._deliver_one(b, msg, sem))

    async def _deliver_one(self, b: BoardState, msg: Message, sem: asyncio.Semaphore) -> None:
        nonce = os.urandom(4)
        prefix = self._prefix
        timeout_ms = self._exchange.timeout_ms
        try:
            topic = ndn_name.from_uri(msg.topic.decode())
            buf = bytearray(len(topic) + len(prefix) + len(msg.payload) + OVERHEAD)
            n = notify.encode_msg_data(buf, 0, prefix, topic, nonce, msg.payload,
                                       signer=SIGNER)
            self._serve[nonce] = bytes(buf[:n])
            # the publisher's taken-time rides on in the notify (docs/protocols/event-time.md)
            taken = notify.taken_value(msg.t_taken) if msg.t_taken is not None else None
            nacked: list[bool] = []
            round_s = self._retries * timeout_ms / 1000
            while True:
                for _ in range(self._retries):
                    nb = bytearray(len(topic) + len(prefix) + OVERHEAD + 10)
                    n = notify.encode_notify_interest(nb, 0, topic, prefix, nonce,
                                                      lifetime_ms=timeout_ms, signer=SIGNER,
                                                      taken=taken)
                    nacked = []
                    if await self._exchange.express(bytes(nb[:n]), [b.face], nacked,
                                                    owner=b.face) is not None:
                        b.counters["delivered"] += 1
                        self._feed.outcome(msg, b.name, "delivered")
                        return
                    # asleep: nothing more is sent to it (a board asleep hears nothing)
                    if not b.face.up or b.asleep_since is not None:
                        break
                if not self._sleepers.keep_trying(b, 2 * round_s):
                    break
            if b.asleep_since is not None:
                # it fell asleep with this notify out: it goes first at the next wake
                self._sleepers.requeue(b, msg)
                return
            b.counters["deliver_failed"] += 1
            self._feed.outcome(msg, b.name, "nacked" if nacked else "dropped")
        finally:
            self._serve.pop(nonce, None)
            sem.release()
