"""Retained topics: the bridge's last-value topics on the BitTorrent DHT.

A topic configured `retained` keeps its latest message as the topic's BEP 44 mutable item
(signed with the gateway's key, salt = the topic URI) and is followed through the topic's
BEP 50 overlay. A message a board publishes on it is put on the DHT and pushed to the
overlay's members; a gateway that starts later joins the overlay and gets the last value
at once, then every newer one pushed (never polled). Values from the DHT enter the hub as
ordinary messages, so boards see retained topics as ordinary subscriptions; a board that
registers later is handed the topic's last value once. The profile of BEP 44/50 this is,
with a put query's bytes: docs/protocols/dht-retained.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pubmote.dht import bep44
from pubmote.dht.bep50 import TopicOverlay
from pubmote.dht.node import DhtNode

if TYPE_CHECKING:
    from pubmote.core.hub import BoardInfo, Hub, Message

log = logging.getLogger("pubmote.dht.retained")

INGRESS = "dht"  # Message.ingress of values that came from the DHT (never put back there)
MESH_INGRESS = "mesh"  # gateway.mesh.relay.INGRESS: relayed by another gateway (its to put)
MAX_TOPICS = 64
REPUT_S = 30 * 60.0  # BEP 44 items expire (about 2 hours); the owner stores them again


def salt_of(topic: bytes) -> bytes:
    """The BEP 44 salt of a topic: its URI, or SHA-1 of it when over 64 bytes."""
    return topic if len(topic) <= bep44.MAX_SALT else hashlib.sha1(topic).digest()


class RetainedTopics:
    """The DHT node, one overlay per retained topic, and the hub hooks between them."""

    def __init__(self, hub: Hub, topics: Iterable[str], *, key: bep44.KeyPair | None,
                 pubkey: bytes | None = None, host: str = "127.0.0.1", port: int = 0,
                 bootstrap: Iterable[tuple[str, int]] = (),
                 query_timeout_s: float = 2.0) -> None:
        self.hub = hub
        self.entries = [t.encode() for t in topics]
        if pubkey is None:
            if key is None:
                raise ValueError("retained topics need dht_key_file or dht_pubkey")
            pubkey = key.public
        self.pubkey = pubkey
        # with another gateway's public key we follow its topics but cannot sign them
        self.key = key if key is not None and key.public == pubkey else None
        self.node = DhtNode(host=host, port=port, bootstrap=bootstrap,
                            query_timeout_s=query_timeout_s)
        self.overlays: dict[bytes, TopicOverlay] = {}
        self._seq: dict[bytes, int] = {}
        self._pending: dict[bytes, Message] = {}  # the newest unpublished message per topic
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        # (board, its start-up, topic) -> seq; a board that sends no boot number is known
        # by its face instead (a board new on a face may have lost what it had)
        self._given: dict[tuple[str, str, bytes], int] = {}
        self.counters = {"published": 0, "put_nodes": 0, "received": 0, "too_big": 0,
                         "no_key": 0, "topics_refused": 0, "given_to_boards": 0, "dropped": 0}

    # ---- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.node.start()
        self.hub.add_listener(self._on_message)
        self.hub.add_register_hook(self._on_register)
        self._worker = self.node.spawn(self._publish_loop())
        if self.key is not None:
            self.node.spawn(self._reput_loop())
        # exact topics are joined now: their last value arrives before any board asks
        exact = [t for t in self.entries if not t.endswith(b"/")]
        await asyncio.gather(*(self._overlay(t) for t in exact))

    async def close(self) -> None:
        self.hub.remove_listener(self._on_message)
        self.hub.remove_register_hook(self._on_register)
        for ov in self.overlays.values():
            ov.leave()
        await self.node.close()

    def retained(self, topic: bytes) -> bool:
        """Whether topic is configured retained: equal to an entry, or under an entry that
        ends with "/"."""
        return any(topic == e or (e.endswith(b"/") and topic.startswith(e))
                   for e in self.entries)

    async def _overlay(self, topic: bytes) -> TopicOverlay | None:
        ov = self.overlays.get(topic)
        if ov is not None:
            return ov
        if len(self.overlays) >= MAX_TOPICS:
            self.counters["topics_refused"] += 1
            return None
        ov = TopicOverlay(self.node, self.pubkey, salt_of(topic),
                          on_update=lambda item: self._on_update(topic, item))
        self.overlays[topic] = ov
        await ov.join()
        return ov

    # ---- board -> DHT -------------------------------------------------------------------

    def _on_message(self, msg: Message) -> None:
        # what came from the DHT is there already; what came from another gateway's mesh is
        # that gateway's to put (under its key), else every gateway would put each value
        if msg.ingress in (INGRESS, MESH_INGRESS) or not self.retained(msg.topic):
            return
        if self.key is None:
            self.counters["no_key"] += 1
            return
        if msg.topic not in self._pending and len(self._pending) >= MAX_TOPICS:
            self.counters["dropped"] += 1  # bounded: a flood of new topics waits its turn
            return
        self._pending[msg.topic] = msg  # only the newest matters for a last-value topic
        self._wake.set()

    async def _publish_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                topic = next(iter(self._pending))
                msg = self._pending.pop(topic)
                try:
                    await self._publish(topic, msg.payload)
                except Exception:  # one bad publish must not stop the rest
                    log.exception("retained publish of %r failed", topic)

    async def _reput_loop(self) -> None:
        while True:
            await asyncio.sleep(REPUT_S)
            for topic, ov in list(self.overlays.items()):
                if ov.item is not None and ov.item.key == self.pubkey:
                    try:
                        await self.node.put_mutable(ov.item)
                    except Exception:  # retried at the next round
                        log.exception("re-put of %r failed", topic)

    async def _publish(self, topic: bytes, payload: bytes) -> None:
        assert self.key is not None
        ov = await self._overlay(topic)
        if ov is None:
            return
        # seq: the clock in ms, and above anything seen, so a restarted gateway (or another
        # holding the same key) never goes backwards
        last = max(self._seq.get(topic, 0), ov.item.seq if ov.item is not None else 0)
        seq = max(last + 1, int(time.time() * 1000))
        try:
            item = bep44.sign_item(self.key, payload, seq, salt_of(topic))
        except ValueError as e:
            self.counters["too_big"] += 1
            log.warning("retained topic %r: %s", topic, e)
            return
        self._seq[topic] = seq
        await ov.publish(item)
        self.counters["published"] += 1
        self.counters["put_nodes"] += await self.node.put_mutable(item)

    # ---- DHT -> boards ------------------------------------------------------------------

    def _on_update(self, topic: bytes, item: bep44.MutableItem) -> None:
        if item.seq <= self._seq.get(topic, -1):
            return  # our own publish coming back, or older
        self._seq[topic] = item.seq
        value = item.value()
        if not isinstance(value, bytes):
            return  # another writer's non-string value: not a pubmote message
        self.counters["received"] += 1
        from pubmote.core.hub import Message

        msg = Message(topic, value, "dht:" + item.key.hex()[:16], INGRESS)
        line = msg.line()
        for b in self.hub.board_infos():  # these get it now: not again when they register
            if b.matches(line):
                self._give(b, topic, item.seq)
        self.hub.publish(msg)

    def last(self, topic: bytes) -> bep44.MutableItem | None:
        ov = self.overlays.get(topic)
        return ov.item if ov is not None else None

    def _on_register(self, b: BoardInfo) -> None:
        """A board (re)registered: hand it each retained topic's last value its filters
        match, once per start-up of the board and value."""
        try:
            self._hand_last_values(b)
        except Exception:  # never let this hook break a registration
            log.exception("retained values for board %s failed", b.name)

    def _hand_last_values(self, b: BoardInfo) -> None:
        from pubmote.core.hub import Message

        for topic, ov in self.overlays.items():
            item = ov.item
            if item is None:
                continue
            value = item.value()
            if not isinstance(value, bytes):
                continue
            msg = Message(topic, value, "dht:" + item.key.hex()[:16], INGRESS)
            if not b.matches(msg.line()):
                continue
            # through the hub, as every delivery: a full queue's drop is counted and journaled
            if self._give(b, topic, item.seq) and self.hub.deliver(b.name, msg):
                self.counters["given_to_boards"] += 1

    def _give(self, b: BoardInfo, topic: bytes, seq: int) -> bool:
        """Note that board b (since its last start-up) has the value seq; False if it had."""
        k = (b.name, "boot%d" % b.boot if b.boot is not None else "face%d" % b.face_id, topic)
        if self._given.get(k, -1) >= seq:
            return False
        if len(self._given) > 4096:
            self._given.clear()  # bounded: at worst a board gets a value twice
        self._given[k] = seq
        return True

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out["node"] = self.node.stats()
        out["topics"] = {t.decode(errors="replace"): (ov.item.seq if ov.item else None,
                                                       len(ov.table))
                         for t, ov in self.overlays.items()}
        return out


async def from_config(hub: Hub, cfg: dict[str, Any]) -> RetainedTopics:
    """RetainedTopics from the bridge's config keys (retained, dht_key_file, dht_pubkey,
    dht_host, dht_port, dht_bootstrap), started."""
    from pubmote.core.addresses import log_exposure, parse_hostport

    def listed(v: Any) -> list[str]:
        return [v] if isinstance(v, str) else list(v or [])

    key = bep44.KeyPair.load(cfg["dht_key_file"], create=True) if cfg.get("dht_key_file") \
        else None
    pub = cfg.get("dht_pubkey")
    pubkey = bytes.fromhex(pub) if pub else None
    if pubkey is not None and len(pubkey) != bep44.KEY_LEN:
        raise ValueError("dht_pubkey must be 64 hex digits")
    rt = RetainedTopics(hub, listed(cfg["retained"]), key=key, pubkey=pubkey,
                        host=str(cfg.get("dht_host") or "127.0.0.1"),
                        port=int(cfg.get("dht_port") or 0),
                        bootstrap=[parse_hostport(s) for s in listed(cfg.get("dht_bootstrap"))],
                        query_timeout_s=float(cfg.get("dht_timeout_s") or 2.0))
    try:
        await rt.start()
    except BaseException:
        await rt.close()
        raise
    log_exposure(log, "the DHT node", "%s:%d" % (rt.node.host, rt.node.port), rt.node.host,
                 "the DHT is public by design: items are signed (BEP 44), and only the "
                 "key's holder can change a retained topic")
    log.info("retained topics on the DHT at %s:%d (key %s): %s", rt.node.host, rt.node.port,
             rt.pubkey.hex()[:16], ", ".join(t.decode() for t in rt.entries))
    return rt
