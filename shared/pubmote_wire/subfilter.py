# nanomsg SUB prefix filters, on their own so a board that only filters (pubmote_node)
# does not load the SP-over-TCP codec in sp.py.


class SubFilter:
    """NN_SUB subscriptions with nanomsg's semantics.

    A message matches if any subscribed topic is a byte prefix of it; the empty topic
    matches everything; no subscriptions match nothing. Like nanomsg's trie, each topic
    carries a reference count: subscribing twice then unsubscribing once keeps it.
    Unsubscribing a topic not subscribed is a no-op (returns False), as nanomsg does not
    report it. At most max_topics distinct topics (ValueError beyond)."""

    def __init__(self, max_topics=64):
        self.max_topics = max_topics
        self._topics = []  # distinct topics (bytes), in first-subscribed order
        self._refs = []  # reference counts, parallel to _topics

    def _find(self, topic):
        for i in range(len(self._topics)):
            if self._topics[i] == topic:
                return i
        return -1

    def subscribe(self, prefix):
        topic = bytes(prefix)
        i = self._find(topic)
        if i >= 0:
            self._refs[i] += 1
            return
        if len(self._topics) >= self.max_topics:
            raise ValueError("too many subscriptions")
        self._topics.append(topic)
        self._refs.append(1)

    def unsubscribe(self, prefix):
        """Remove one instance of prefix; True if there was one."""
        i = self._find(bytes(prefix))
        if i < 0:
            return False
        self._refs[i] -= 1
        if self._refs[i] == 0:
            del self._topics[i]
            del self._refs[i]
        return True

    def prefixes(self):
        """The distinct subscribed topics."""
        return list(self._topics)

    def __len__(self):
        return len(self._topics)

    def matches(self, msg):
        n = len(msg)
        for t in self._topics:
            k = len(t)
            if k > n:
                continue
            i = 0
            while i < k and msg[i] == t[i]:
                i += 1
            if i == k:
                return True
        return False
