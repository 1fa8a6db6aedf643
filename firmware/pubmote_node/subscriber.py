# The board as an NDN notify pub/sub subscriber: a notify names a message; fetch it from
# /<publisher>/msg/<topic>/<nonce>, hand it to the app once (a ring of the last 32 remembers
# what was delivered) and ack the notify. Messages reach the app in the order their
# notifies came, however long each fetch takes; a notify sent again while its message is
# on its way is let go (its ack answers it). Loaded at the first notify: a board that never
# receives one (one that only publishes, or subscribes to what nobody sends) never holds it.
from pubmote_wire import control_core as control
from pubmote_wire import name
from pubmote_wire import notify_core as notify
from pubmote_wire.compat import const

from .face import Event


class Subscriber:
    """on_notify() for each notify parsed; deliver(topic_uri, payload, publisher) hands
    each new message on (publisher: its Name's TLV value)."""

    def __init__(self, exchange, port, counters, deliver):
        self._exchange = exchange
        self._port = port
        self._counters = counters  # counts dup_notify, fetch_failed, received
        self._deliver = deliver
        self._seen = new_ring()
        # (publisher, nonce) of the messages on their way (fetched, not yet handed on): a
        # bridge that sends a notify again before a slow board has answered (an emulated
        # board on a busy host) must not make it fetch the same message twice
        self._fetching = []
        # the notifies taken (numbered as they came) and the number whose turn it is to be
        # handed on: a fetch tried again (a slow board's timed out) is not overtaken
        self._next = 0
        self._turn = 0
        # set each time the turn moves on (made only while a notify waits for its turn)
        self._turned = None

    async def on_notify(self, notify_name, topic, publisher, nonce, timeout_ms, retries):
        """Fetch, deliver and ack the message a notify names (topic, publisher and nonce as
        bytes); a duplicate is only acked, a message not fetched in `retries` tries only
        counted (the bridge sends its notify again)."""
        counters = self._counters
        if ring_seen(self._seen, publisher, nonce):
            counters["dup_notify"] += 1
            await self._ack(notify_name)
            return
        key = (publisher, nonce)
        fetching = self._fetching
        if key in fetching:
            counters["dup_notify"] += 1  # the ack of the fetch under way answers it
            return
        fetching.append(key)
        seq = self._next
        self._next = seq + 1
        ex = self._exchange
        data = None
        try:
            for _ in range(retries):
                # the codec picks a random Interest nonce
                n = ex.encode(notify.encode_msg_interest, publisher, topic, nonce,
                              lifetime_ms=timeout_ms)
                data = await ex.express(n, timeout_ms)
                if data is not None:
                    break
            while self._turn < seq:  # the notifies before it first
                turned = self._turned
                if turned is None:
                    turned = self._turned = Event()
                await turned.wait()
            if data is not None:
                ring_remember(self._seen, publisher, nonce)
                payload = bytes(data.content) if data.content is not None else b""
                counters["received"] += 1
                self._deliver(name.to_uri(topic).encode(), payload, publisher)
        finally:
            fetching.remove(key)
            if self._turn <= seq:  # (past it already: a later one was cancelled waiting)
                self._turn = seq + 1
            # every waiter is woken to look at the turn (and the Event let go: the ones
            # woken are already on their way, on both runtimes; one still waiting for its
            # turn makes the next)
            turned = self._turned
            if turned is not None:
                self._turned = None
                turned.set()
        if data is None:
            counters["fetch_failed"] += 1
            return
        await self._ack(notify_name)

    async def _ack(self, notify_name):
        await self._port.send_quiet(control.encode_ack(notify_name))


# ---- the memory of messages delivered, against duplicate notifies -----------------------
# The last 32 (publisher, NotifyNonce) pairs delivered, in fixed slots of one bytearray
# whose last byte is the slot the next pair takes; a slot names its publisher by an index
# into a list that holds one copy of each publisher a slot still names. No object per
# message, and the ring is a record [slots, publishers] with functions, not a class: a
# class object costs a board's heap (~180 B) more than the record itself.

_SLOTS = const(32)  # pairs remembered
_NONCE_KEPT = const(8)  # nonce bytes a slot holds (a longer nonce: its digest's)
_SLOT = const(10)  # a slot: publisher index (0xFF: empty), nonce length, the nonce bytes
_NEXT = const(_SLOTS * _SLOT)  # the byte after the slots: the number of the next slot
_EMPTY = const(0xFF)


def new_ring():
    """An empty ring: [slots, publishers]."""
    slots = bytearray(b"\xff" * (_NEXT + 1))
    slots[_NEXT] = 0
    return [slots, []]


def ring_seen(ring, publisher, nonce):
    """True if (publisher, nonce) is among the last 32 pairs ring_remember() took."""
    slots, pubs = ring
    k = _index(pubs, publisher)
    if k < 0:
        return False
    key = _nonce_key(nonce)
    n = len(key)
    for p in range(0, _NEXT, _SLOT):
        if slots[p] != k or slots[p + 1] != len(nonce) & 0xFF:
            continue
        i = 0
        while i < n and slots[p + 2 + i] == key[i]:
            i += 1
        if i == n:
            return True
    return False


def ring_remember(ring, publisher, nonce):
    """Remember (publisher, nonce) in the oldest slot."""
    slots, pubs = ring
    at = slots[_NEXT]
    slots[_NEXT] = (at + 1) % _SLOTS
    p = at * _SLOT
    slots[p] = _EMPTY  # the oldest slot is taken over: it no longer names its publisher
    k = _index(pubs, publisher)
    if k < 0:
        # the first index no slot names (a forgotten publisher's), else a new one
        k = 0
        while k < len(pubs) and _names(slots, k):
            k += 1
        if k == len(pubs):
            pubs.append(publisher)
        else:
            pubs[k] = publisher
    key = _nonce_key(nonce)
    slots[p] = k
    slots[p + 1] = len(nonce) & 0xFF
    slots[p + 2 : p + 2 + len(key)] = key


def _index(items, x):
    for k in range(len(items)):
        if items[k] == x:
            return k
    return -1


def _names(slots, k):
    # True if a slot names publisher index k
    for p in range(0, _NEXT, _SLOT):
        if slots[p] == k:
            return True
    return False


def _nonce_key(nonce):
    # what a slot keeps of a nonce: the nonce itself up to 8 bytes (every NotifyNonce in
    # use: ndn-python-repo's is an 8-byte-at-most integer, the bridge's 4 bytes), else the
    # first 8 bytes of its SHA-256 (with its length: a false match needs a 2**-64 collision)
    if len(nonce) <= _NONCE_KEPT:
        return nonce
    from pubmote_wire.compat import sha256

    return sha256(nonce).digest()[:_NONCE_KEPT]
