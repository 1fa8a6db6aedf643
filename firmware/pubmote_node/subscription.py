# What the app receives: Messages, through Subscriptions (nanomsg SUB-style prefix filters
# over `<topic URI>|<payload>`, each with a bounded queue that keeps the newest). Loaded at
# the first subscribe(), directed() or message: a board that only publishes never holds it.
from pubmote_wire.subfilter import SubFilter

from .face import Event


def _bytes(prefix):
    return prefix.encode() if isinstance(prefix, str) else bytes(prefix)


class Message:
    """A received message: topic (URI bytes), payload (bytes), publisher (URI bytes)."""

    def __init__(self, topic, payload, publisher):
        self.topic = topic
        self.payload = payload
        self.publisher = publisher

    def __repr__(self):
        return "<Message %s %d B>" % (self.topic, len(self.payload))


class Subscription:
    """Prefix filters with nanomsg SUB semantics and a bounded receive queue.

    subs: the node's list of subscriptions, this one in it (close() takes it out);
    changed: the Event set when its filters change (the node registers them again)."""

    def __init__(self, prefixes, queue_len, subs, changed):
        self.filter = SubFilter()
        self._q = []
        self._qlen = queue_len
        self._ev = Event()
        self._subs = subs
        self._changed = changed
        self.dropped = 0
        for p in prefixes:
            self.filter.subscribe(_bytes(p))

    def subscribe(self, prefix):
        self.filter.subscribe(_bytes(prefix))
        self._changed.set()

    def unsubscribe(self, prefix):
        found = self.filter.unsubscribe(_bytes(prefix))
        self._changed.set()
        return found

    def offer(self, msg):
        """Queue msg for recv(); when the queue is full, the oldest is dropped (counted)."""
        if len(self._q) >= self._qlen:
            self._q.pop(0)  # keep the newest: a sensor subscriber wants the latest value
            self.dropped += 1
        self._q.append(msg)
        self._ev.set()

    async def recv(self):
        """Wait for the next message that matches this subscription's filters."""
        while not self._q:
            self._ev.clear()
            await self._ev.wait()
        return self._q.pop(0)

    def pending(self):
        return len(self._q)

    def close(self):
        if self in self._subs:
            self._subs.remove(self)
            self._changed.set()
