"""Board -> hub: the hub as the NDN notify subscriber. A board's notify is answered by a
fetch of the message (or the message carried inline), the message is handed on, then the
notify is acked; duplicates are acked again and not relayed twice. An ack leaves only after
the turn's relays are written to the subscribers' sockets (HubBase.ack_after_relay)."""

from __future__ import annotations

import logging
import time

from pubmote.core.auth import board_of
from pubmote.core.hub_base import OVERHEAD, HubBase, new_nonce
from pubmote.core.messages import Message
from pubmote.core.registry import HubFace
from pubmote_wire import batch, notify
from pubmote_wire import data as ndn_data
from pubmote_wire import name as ndn_name
from pubmote_wire.errors import DecodeError

log = logging.getLogger("pubmote.hub")


class NotifyIntake(HubBase):
    """Takes messages in from boards and NDN apps that publish."""

    async def _on_notify(self, face: HubFace, notify_name: bytes, topic: bytes,
                         publisher: bytes, nonce: bytes, fwd_hint: bytes | None = None,
                         t_board: int | None = None, inline: bytes | None = None,
                         t_taken: int | None = None) -> None:
        key = publisher + b"\x00" + nonce
        if key in self._done:
            self._count_board(face, "duplicates")
            self._ack(face, notify_name)
            return
        if key in self._inflight:
            return  # a retransmitted notify; the ack of the first answers both (same name)
        self._inflight.add(key)
        try:
            d = self._inline_msg(inline, publisher, topic, nonce)
            reply = inline if d is not None else await self._fetch(face, publisher, topic,
                                                                   nonce, fwd_hint)
            if reply is None:
                self.counters["fetch_failed"] += 1
                self._count_board(face, "fetch_failed")
                self._journal_event("fetch_failed", face.board or ndn_name.to_uri(publisher),
                                    face.label, topic=ndn_name.to_uri(topic))
                return
            if (self.auth is not None and face.kind != "ndn" and self.auth.requires(topic)
                    and self.auth.data_refusal(board_of(publisher), reply) is not None):
                return
            if d is None:
                d = ndn_data.decode_data(reply)
            payload = bytes(d.content) if d.content is not None else b""
            self._done[key] = True
            while len(self._done) > 4096:
                self._done.popitem(last=False)
            origin = face.board or ndn_name.to_uri(publisher)
            msg = Message(ndn_name.to_uri(topic).encode(), payload, origin, face.label, t_board,
                          t_taken=t_taken)
            self._count_board(face, "published")
            b = self.boards.get(face.board or "")
            if b is not None:
                b.last_seen = time.time()
            self.publish(msg)
            # acked once the message is written to every connected subscriber's socket (or
            # queued there): an acked message is never lost by a crash of the board
            self._ack(face, notify_name)
        finally:
            self._inflight.discard(key)

    def _on_batch(self, face: HubFace, pkt: bytes) -> None:
        """A BATCH frame (docs/protocols/link-batch.md): relay each new message, then ack
        all of them in one ACKS frame. Relaying is synchronous (publish() hands a message to
        every subscriber's queue before it returns) and the ACKS frame leaves after those
        queues are written to the subscribers' sockets (ack_after_relay), so every seq acked
        here has been handed on: the guarantee of an NDN notify's ack."""
        b = self.boards.get(face.board or "")
        if b is None or not b.batch or b.face is not face:
            # not (or no longer) agreed with this board, e.g. a bridge that restarted: no
            # ack, so the board sends again once it has registered
            self.counters["batch_refused"] += 1
            return
        epoch, records = batch.decode_batch(pkt)  # DecodeError: counted by on_packet
        if self.auth is not None:
            records = [r for r in records if not self._batch_refused(b.name, r[1])]
        acked = [r[0] for r in records]  # new or seen before, every record is acked
        done = self._done
        uris = self._topic_uris
        origin, label = b.name, face.label
        publish = self.publish
        prefix = b.prefix + epoch.to_bytes(4, "big")
        t_rx = getattr(face, "t_rx", None) or time.time()  # when the face read the batch
        uri = t_prev = None
        new = 0
        for seq, topic, payload, taken in records:
            key = prefix + seq.to_bytes(4, "big")
            if key in done:
                b.counters["duplicates"] += 1
            else:
                if topic is not t_prev:  # records after the first name it by reference
                    t_prev = topic
                    t = bytes(topic)
                    uri = uris.get(t)
                    if uri is None:
                        if len(uris) >= 1024:
                            uris.clear()
                        uri = uris[t] = ndn_name.to_uri(t).encode()
                assert uri is not None
                publish(Message(uri, bytes(payload), origin, label, None, t_rx, taken))
                done[key] = True
                new += 1
        b.counters["published"] += new
        while len(done) > 4096:
            done.popitem(last=False)
        self.counters["batched"] += len(records)
        b.last_seen = t_rx
        if acked:
            ack = bytearray(batch.HEADER + 6 * len(acked))
            off = batch.add_acks(ack, batch.begin(ack, batch.ACKS, epoch), acked)
            self.ack_after_relay(face, bytes(memoryview(ack)[:off]))

    def _batch_refused(self, board: str, topic: memoryview) -> bool:
        # a board without a key publishes no batch record to a topic that needs signing
        # (its NDN notify would fail the same check); a keyed one none outside its grant
        assert self.auth is not None
        if not self.auth.granted(board, bytes(topic)):
            self.auth.reject("not_granted", board, "batch record outside its grant")
            return True
        if self.auth.requires(bytes(topic)):
            self.auth.reject("unsigned", board, "batch record")
            return True
        return False

    def _inline_msg(self, inline: bytes | None, publisher: bytes, topic: bytes,
                    nonce: bytes) -> ndn_data.Data | None:
        """The message Data a notify carried inline, decoded, if it is the one the notify
        announces (else None: it is fetched, as by any subscriber that ignores INLINE_MSG)."""
        if inline is None:
            return None
        try:
            d = ndn_data.decode_data(inline)
        except DecodeError:
            d = None
        if d is None or bytes(d.name) != notify.msg_name(publisher, topic, nonce):
            self.counters["inline_refused"] += 1
            return None
        self.counters["inline"] += 1
        return d

    async def _fetch(self, face: HubFace, publisher: bytes, topic: bytes, nonce: bytes,
                     fwd_hint: bytes | None = None) -> bytes | None:
        # route by the message's name, else by the publisher's forwarding hint (the
        # notify's PublisherFwdHint: the publisher prefix is not announced), else back
        # where the notify came from
        hops = self.fwd.lookup(notify.msg_name(publisher, topic, nonce))
        if not hops and fwd_hint:
            hops = self.fwd.lookup(fwd_hint)
        if not hops:
            hops = [face]
        buf = bytearray(len(publisher) + len(topic) + len(fwd_hint or b"") + OVERHEAD)
        for _ in range(self.retries):
            n = notify.encode_msg_interest(buf, 0, publisher, topic, nonce,
                                           interest_nonce=new_nonce(), lifetime_ms=self.timeout_ms,
                                           fwd_hint=fwd_hint or None)
            pkt = bytes(buf[:n])
            reply = await self._express(pkt, hops, owner=face)
            if reply is not None:
                return reply
        return None
