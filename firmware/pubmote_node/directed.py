# Directed messages on the board: the Directed record, the address check before
# one is sent, and the decoding of one received. Loaded only by a board that sends or
# receives one (node.py imports it then), so the others keep its code and class off the heap.
from pubmote_wire import cbor
from pubmote_wire.errors import DecodeError


class Directed:
    """A received directed message: address (str, e.g. "/gw1/sim1", "/*/*"),
    originator (str, "/orch/node" or "/orch"), topic (str), payload (bytes), ts_ms."""

    def __init__(self, address, originator, topic, payload, ts_ms):
        self.address = address
        self.originator = originator
        self.topic = topic
        self.payload = payload
        self.ts_ms = ts_ms

    def __repr__(self):
        return "<Directed %s from %s %s %d B>" % (self.address, self.originator, self.topic,
                                                  len(self.payload))


def own_copy(node, inbox, address, topic, payload):
    """Check address; offer this board its own copy (into inbox, None: the app never asked
    for directed messages) if the address matches it. True when the message is for this
    board alone (nothing leaves it)."""
    parts = address[1:].split("/") if address[:1] == "/" else []
    if not (1 <= len(parts) <= 2) or "" in parts or "|" in address:
        raise ValueError("address must be /orch, /orch/node, /orch/*, /* or /*/*")
    orch = parts[0]
    name = parts[1] if len(parts) == 2 else None
    mine = node.orch()
    if (orch == "*" or orch == mine) and (name == "*" or name == node.name):
        if inbox is not None:
            origin = "/%s/%s" % (mine or "?", node.name)
            inbox.offer(Directed(address, origin, topic, payload, node.session.now_ms()))
        return orch == mine and name == node.name
    return False


def deliver(inbox, payload, counters):
    """A directed message the bridge sent here (its CBOR envelope) into the board's inbox
    (None: the app never asked for directed messages; counted as filtered)."""
    try:
        m = cbor.loads(payload)
        msg = Directed(m["a"], m["o"], m["t"], m["p"], m.get("ts", 0))
    except (DecodeError, KeyError, TypeError, ValueError):
        counters["bad_packets"] += 1
        return
    if inbox is None:
        counters["filtered"] += 1
    else:
        inbox.offer(msg)
