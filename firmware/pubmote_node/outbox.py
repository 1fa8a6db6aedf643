# The board's outbox: what the app publishes with `publish(..., wait=False)` waits here,
# not in the app, while the bridge is away. Bounded in messages and bytes (config
# "outbox_len", "outbox_bytes"); when full the oldest is dropped and counted
# (counters["outbox_dropped"]). One drain task, alive only while the outbox holds
# messages, publishes them in order, each waiting for the bridge's ack before the next, so
# a message is never overtaken; one the bridge does not ack is tried again once the board
# is connected. Loaded at the first non-blocking publish only, or at boot with the durable
# outbox (config "outbox_dir": outbox_durable.py, its subclass, keeps every queued message
# on the filesystem until it leaves the outbox, and starts with those a reboot left there).
# Each message keeps the time it was taken: its publish ticks while the board runs, and in
# its log record the time itself (ticks mean nothing after a reboot), when the clock was
# synced. The heap bounds it too: bounds set beyond what the heap holds (a long outage's
# worth) make the oldest go, counted the same, once fewer than _RESERVE bytes would be left
# free, or when the heap cannot grow the queue, rather than a MemoryError in the app's
# publish.
import asyncio
import gc

from pubmote_wire.compat import const

_LEN = const(64)  # messages held by default
_BYTES = const(4096)  # bytes of topics and payloads held by default
_IDLE_MS = const(100)  # how often a drain waiting for the bridge looks again
# heap kept free for the app and the link: below it the outbox counts as full, and the
# oldest messages worth about this much are dropped at once (one collection per batch)
_RESERVE = const(8192)
_MSG_HEAP = const(32)  # a queued message's heap beyond its payload's bytes (about)
# tries (each with the node's retries) while connected before a message the bridge never
# acks (e.g. refused by a publish grant) is given up and counted, so it cannot block the
# messages behind it for ever
_TRIES = const(3)


class Outbox:
    """put() queues a message and returns at once; the drain task publishes them in order
    through send(topic, payload, stamp) (the node's waited publish: True once acked; stamp
    the ticks of the app's publish, None when its time is not known). The durable outbox
    is its subclass (outbox_durable.py: its log and what it spilled to flash only are
    class attributes here, no slot in a RAM outbox's instance)."""

    _log = None
    _spilled = 0  # messages on flash only: the newest, after those in RAM

    def __init__(self, node, send):
        self._node = node
        self._send = send
        # counted from the outbox's first use on: a board that never queues holds neither
        node.counters["outbox_dropped"] = 0
        node.counters["outbox_failed"] = 0
        # topic, payload, topic, payload, ... (a flat list: no tuple per message). A topic
        # equal to the one before is stored as that object: a sensor's readings share one
        self._q = []
        # each message's publish ticks beside _q, or (replayed after a reboot) the 8 bytes
        # of its time as the log kept it, made ticks again once the clock is synced
        self._stamps = []
        self._bytes = 0
        self._popped = 0  # messages taken off the head: tells the drain its own went
        self._draining = False

    def __len__(self):
        return len(self._q) // 2 + self._spilled

    def put(self, topic, payload, stamp):
        size = len(topic) + len(payload)
        if size > self._node.config.get("outbox_bytes", _BYTES):
            raise ValueError("message larger than the outbox")
        self._take(topic, payload, stamp, size)
        self.kick()

    def _take(self, topic, payload, stamp, size):
        self._room(size)
        self._hold(topic, payload, stamp)

    def kick(self):
        """Start the drain if messages wait and none runs (at a put, and once the node
        runs: a durable outbox starts with what a reboot left in it)."""
        if self._q and not self._draining:
            self._draining = True
            asyncio.create_task(self._drain())

    def _room(self, size):
        # the oldest dropped (and counted) until a message of size fits
        q = self._q
        cfg = self._node.config
        max_len = cfg.get("outbox_len", _LEN)
        max_bytes = cfg.get("outbox_bytes", _BYTES)
        while q and (len(q) // 2 >= max_len or self._bytes + size > max_bytes):
            self._pop()
            self._node.counters["outbox_dropped"] += 1
        if q and _heap_low():
            self._shed()

    def _shed(self):
        # the heap is the bound: the oldest dropped (counted) until about _RESERVE bytes
        # are freed, then collected
        q = self._q
        freed = 0
        while q and freed < _RESERVE:
            freed += len(q[1]) + _MSG_HEAP
            self._pop()
            self._node.counters["outbox_dropped"] += 1
        gc.collect()

    def _hold(self, topic, payload, stamp):
        q = self._q
        stamps = self._stamps
        if q and topic == q[-2]:
            topic = q[-2]
        while True:
            n = len(q)
            try:
                q.append(topic)
                q.append(payload)
                stamps.append(stamp)
                break
            except MemoryError:  # no block for the grown lists: undone, room made
                while len(q) > n:
                    q.pop()
                while len(stamps) > n // 2:
                    stamps.pop()
                if not q:
                    raise
                self._shed()
        self._bytes += len(topic) + len(payload)

    def _pop(self):
        q = self._q
        self._bytes -= len(q[0]) + len(q[1])
        q.pop(0)
        q.pop(0)
        self._stamps.pop(0)
        self._popped += 1
        if self._log is not None:
            self._log.done()

    async def _drain(self):
        q = self._q
        session = self._node.session
        counters = self._node.counters
        tries = 0
        try:
            while q:
                if not session.connected:
                    tries = 0
                    await asyncio.sleep(_IDLE_MS / 1000)
                    continue
                popped = self._popped
                full = counters["soft_full"]
                stamp = self._stamps[0]
                if stamp is not None and not isinstance(stamp, int):
                    stamp = session.clock.stamp_of(stamp)
                try:
                    ok = await self._send(q[0], q[1], stamp)
                except ValueError:  # too big for one packet: it never will be sent
                    ok = None
                # put() may have dropped it (full) while it was on its way: the head is
                # then another message, left for the next turn
                if popped != self._popped:
                    tries = 0
                    continue
                if ok is None:
                    tries = _TRIES
                if ok:
                    self._pop()
                    if self._spilled:
                        self._refill()
                    tries = 0
                    continue
                # not acked because the soft state was full (waited publishes of the app):
                # no fault of this message's, so no try counted
                if ok is None or (session.connected and counters["soft_full"] == full):
                    tries += 1
                    if tries >= _TRIES:
                        self._pop()
                        if self._spilled:
                            self._refill()
                        counters["outbox_failed"] += 1
                        tries = 0
                        continue
                await asyncio.sleep(_IDLE_MS / 1000)
        finally:
            self._draining = False
            if not q:
                self._q = []  # a list keeps its grown storage when emptied: let it go
                self._stamps = []


def _heap_low():
    # fewer than _RESERVE bytes free once garbage is collected (a collection only when
    # the free figure is low already); never on CPython, whose heap is not the board's
    try:
        if gc.mem_free() >= _RESERVE:
            return False
    except AttributeError:
        return False
    gc.collect()
    return gc.mem_free() < _RESERVE
