# The board side of pubmote: publish (the NDN notify pub/sub publisher), subscribe with
# nanomsg-style prefix filters, receive, answer Interests for named data, and keep the link
# to the bridge up by itself. Node is the app's API over its parts: face.py (Port: frames
# on the link; Exchange: packets by type, Interests awaiting Data), session.py
# (registration, keepalive, reconnect) and, loaded when first needed, subscription.py
# (what the app receives) and subscriber.py (the notify subscriber that fetches it).
import asyncio

from pubmote_wire import control_core as control
from pubmote_wire import interest_core as interest
from pubmote_wire import name
from pubmote_wire import notify_core as notify
from pubmote_wire.compat import const, urandom

from .clock import ticks_ms
from .face import MAX_PACKET, Exchange, Port
from .session import Session

_INLINE_MAX = const(480)  # message Data up to this size rides inline in its notify
_SERVED_MAX = const(8)
# directed messages travel as topics /pubmote/to/<address>; the bridge routes them (a
# const: no module global, which would be heap on a board)
_TO = const(b"/pubmote/to/")
# the bridge's call to fetch an update: /pubmote/ctl/update/<v> (updater.py)
_UPDATE = const(b"\x08\x07pubmote\x08\x03ctl\x08\x06update")


class Node:
    """A board's pubmote endpoint.

    config: {"name": "sim1", "link": "pty"|"uart"|"stdio"|"tcp"|"udp", ...link settings,
    "prefix": "/pubmote/node/<name>" (default), "max_soft": 8, "max_soft_bytes": 4096,
    "queue_len": 16, "timeout_ms": 1500, "retries": 3, "keepalive_ms": 3000, "inline": True,
    "outbox_len": 64, "outbox_bytes": 4096, "outbox_dir": None (a directory: the outbox
    kept on the filesystem, outlog.py), "outbox_log_bytes": None (with outbox_dir: messages
    past the RAM's bounds wait on flash only, up to that many bytes of log)}.
    Start it with `asyncio.create_task(node.run())`; publish and subscribe at any time.
    Its parts: port (the link's frames), exchange (Interests awaiting Data) and session
    (the bridge's registration: connected, gateway).
    """

    def __init__(self, config, link=None, wlan=None):
        self.name = config["name"]
        self.config = config
        self.prefix = name.from_uri(config.get("prefix", "/pubmote/node/" + self.name))
        # max_soft, max_soft_bytes, queue_len, retries, keepalive_ms and inline (small
        # messages inline in their notify: docs/protocols/board-link.md) are read from the
        # config where used: an attribute each would cost the board's heap
        self.timeout_ms = config.get("timeout_ms", 1500)
        self.counters = {
            "published": 0, "acked": 0, "publish_failed": 0, "soft_full": 0,
            "received": 0, "filtered": 0, "dup_notify": 0, "fetch_failed": 0,
            "sent_frames": 0, "bad_packets": 0, "nacks": 0, "reconnects": 0,
            "registrations": 0, "pending_full": 0, "errors": 0,
        }
        # with a key (from `pubmote deploy --key-file`) the board signs with HmacWithSha256
        key = config.get("key")
        self._key = None
        self._signer = notify.DIGEST  # the codec's one DigestSigner
        if key:
            from binascii import unhexlify

            from pubmote_wire.hmac256 import HmacSigner  # only a board with a key loads HMAC

            self._key = unhexlify(key)
            self._signer = HmacSigner(self._key)
        self.port = Port(self.counters, link, config.get("link") == "udp")
        self.exchange = Exchange(self.port, self.counters, self._on_interest)
        self._served = []  # (name prefix, handler): named data this board answers
        self.session = Session(self, self._on_packet, self._served, self._signer, self._key,
                               wlan)
        self._soft = {}  # NotifyNonce -> encoded msg Data, until the bridge acks
        self._subs = []
        self._inbox = None  # directed messages, once the app asks for them (directed())
        self._subscriber = None  # made at the first notify (subscriber.py)
        self._last_pub = (None, None)  # a publisher's name (TLV) and its URI, for Message
        self._outbox = None  # made at the first publish(..., wait=False) (outbox.py)
        if config.get("outbox_dir"):  # the durable outbox: what a reboot left, queued again
            from .outbox_durable import DurableOutbox

            self._outbox = DurableOutbox(self, self._publish_now)

    @property
    def connected(self):
        """True while the bridge answers the board's registrations."""
        return self.session.connected

    @property
    def gateway(self):
        """The bridge's name, from its last answer to a registration (None before)."""
        return self.session.gateway

    # ---- public API -------------------------------------------------------------------

    def subscribe(self, *prefixes):
        """Subscribe to byte prefixes of `<topic URI>|<payload>` (empty matches all)."""
        from .subscription import Subscription

        wake = self.session.wake
        sub = Subscription(prefixes, self.config.get("queue_len", 16), self._subs, wake)
        self._subs.append(sub)
        wake.set()
        return sub

    async def publish(self, topic, payload, wait=True):
        """Publish payload on topic (a URI).

        wait=True: return True once the bridge has acked it; False (and counted) when the
        soft state is full or every retry timed out, the message then forgotten.
        wait=False: return "queued" at once: the message is in the board's outbox
        (outbox.py), sent in order after those queued before it, tried again until the
        bridge acks it; a full outbox drops its oldest (counters["outbox_dropped"]).
        Either way the message carries the time of this call by the board's clock (its
        taken-time: docs/protocols/event-time.md), however late it is sent.
        """
        stamp = ticks_ms()
        payload = as_bytes(payload)
        if not wait:
            ob = self._outbox
            if ob is None:
                from .outbox import Outbox

                ob = self._outbox = Outbox(self, self._publish_now)
            ob.put(topic, payload, stamp)
            return "queued"
        return await self._publish_now(topic, payload, stamp)

    def time_ms(self):
        """Now by the board's clock (the gateway's time, taken at registration): ms since
        1970, or None until the board has registered once (a long int on a 32-bit board)."""
        return self.session.clock.ms(ticks_ms())

    def time_uncertainty_ms(self):
        """How far time_ms() may be off (ms): half the round trip of the registration it
        was taken from, plus the ticks' drift since; None until the board has registered."""
        return self.session.clock.uncertainty(ticks_ms())

    def _publish_now(self, topic, payload, stamp):
        # the publish's coroutine: the batcher's while the bridge takes link batches, else
        # the NDN notify's. A plain function: no frame of its own held on the heap while the
        # message is on its way. stamp: ticks_ms() when the app published it, its
        # taken-time once read by the clock (None: not known, which a timed batch cannot
        # say; the notify then carries none)
        b = self.session.batch
        if b is not None and b.on and stamp is not None:
            return b.publish(topic, payload, stamp)
        return self._notify(topic, payload, stamp)

    async def _notify(self, topic, payload, stamp):
        topic_name = name.from_uri(topic) if isinstance(topic, str) else name.from_uri(topic.decode())
        nonce = urandom(4)
        ex = self.exchange
        n = ex.encode(notify.encode_msg_data, self.prefix, topic_name, nonce, payload,
                      signer=self._signer)
        data = ex.copy(n)  # kept until acked (the scratch let go)
        if n + 64 > MAX_PACKET:
            raise ValueError("payload too large for one packet")
        cfg = self.config
        held = n  # the soft state's bytes, counted here (at most max_soft messages)
        for d in self._soft.values():
            held += len(d)
        if len(self._soft) >= cfg.get("max_soft", 8) or held > cfg.get("max_soft_bytes", 4096):
            self.counters["soft_full"] += 1
            return False
        self._soft[nonce] = data
        self.counters["published"] += 1
        # a small message rides in the notify itself: the bridge acks it without fetching
        # (one round trip instead of two); a bridge that does not know INLINE_MSG fetches
        inline = data if cfg.get("inline", True) and n <= _INLINE_MAX else None
        key = self._key
        clock = self.session.clock
        try:
            for _ in range(cfg.get("retries", 3) + 1):
                n = ex.encode(
                    notify.encode_notify_interest, topic_name, self.prefix, nonce,
                    lifetime_ms=self.timeout_ms, signer=self._signer,
                    sig_nonce=urandom(8) if key else None,
                    sig_time_ms=self.session.now_ms() if key else None, inline=inline,
                    taken=clock.value(stamp))
                if await ex.express(n, self.timeout_ms) is not None:
                    self.counters["acked"] += 1
                    return True
            self.counters["publish_failed"] += 1
            return False
        finally:
            self._soft.pop(nonce, None)
            if not self._soft:
                self._soft.clear()  # frees its grown table, as exchange.express does

    async def sleep(self, ms):
        """Deep-sleep for ms milliseconds: the bridge is told and keeps this board's
        session, holding what is published for it until it is back (docs/protocols/
        sleep.md). The board wakes through main.py with nothing of its RAM, so this call
        returns only when the sleep was called off: False, because messages the app has
        not taken yet arrived for it meanwhile (take them, then sleep again).
        (sleep.py: loaded at the first call.)"""
        from .sleep import sleep

        return await sleep(self, ms)

    def sending(self):
        """How many of the app's messages wait for the bridge (soft state, outbox)."""
        return len(self._soft) + (len(self._outbox) if self._outbox is not None else 0)

    def unread(self):
        """How many received messages wait in the app's subscriptions."""
        n = 0
        for s in self._subs:
            n += s.pending()
        return n

    def directed(self, into=None):
        """The queue of directed messages for this board: `msg = await q.recv()` gives a
        Directed. Messages the bridge addresses here arrive whatever the filters are.
        into: a Subscription of this node's (from subscribe()) to take them instead, beside
        its own Messages (each has .payload): one queue and one task for both, where an app
        handles the two alike (the demo's commands), saves a board ~0.5 kB of heap."""
        if into is not None:
            self._inbox = into
        elif self._inbox is None:
            from .subscription import Subscription

            self._inbox = Subscription((), self.config.get("queue_len", 16), self._subs,
                                       self.session.wake)
        return self._inbox

    async def send(self, address, topic, payload):
        """Send a directed message to address: "/orch/node" (one board),
        "/orch" (a gateway), "/orch/*" (a gateway and its boards), "/*" (every gateway),
        "/*/*" (everything). A board the address matches gets its own copy here (nothing
        comes back from the bridge). True once the bridge has acked it (or nothing had to
        leave the board), False when publishing failed."""
        from .directed import own_copy

        payload = as_bytes(payload)
        if own_copy(self, self._inbox, address, topic, payload):
            return True  # for this board only: it never leaves
        return await self.publish("/pubmote/to" + address, as_bytes(topic) + b"|" + payload)

    def orch(self):
        """The name of this board's gateway (its orch, as addresses spell it), once known."""
        gateway = self.session.gateway
        if not gateway:
            return None
        return gateway.rsplit("/", 1)[-1]

    def serve(self, prefix, handler):
        """Answer Interests under prefix (a URI): handler(name_uri_bytes) returns the
        content as bytes, or None to stay silent. The bridge routes them here, so NDN apps
        fetch the board's named data with an ordinary Interest."""
        if len(self._served) >= _SERVED_MAX:
            raise ValueError("at most 8 served prefixes")
        self._served.append((name.from_uri(prefix), handler))
        self.session.wake.set()

    def stats(self):
        """Counters, link state and queue depths, for the app and the bridge's view."""
        s = dict(self.counters)
        s["connected"] = self.session.connected
        s["soft_state"] = len(self._soft)
        s["outbox"] = len(self._outbox) if self._outbox is not None else 0
        s["pending"] = len(self.exchange.pending)
        s["sub_dropped"] = sum(x.dropped for x in self._subs)
        s["frames_bad"] = self.port.frames_bad()
        s["clock_unc_ms"] = self.time_uncertainty_ms()
        wifi = self.session.wifi
        if wifi is not None:
            s.update(wifi.stats())
        try:
            import gc

            s["mem_free"] = gc.mem_free()
            s["mem_alloc"] = gc.mem_alloc()
        except AttributeError:  # CPython
            pass
        return s

    def filters(self):
        out = []
        for s in self._subs:
            for p in s.filter.prefixes():
                if p not in out:
                    out.append(p)
        return out

    def run(self):
        """Keep the link up forever: open, register, keep alive, reopen on any fault. (The
        session's own coroutine: no frame of this one held on the heap while it runs.)"""
        if self._outbox is not None:
            self._outbox.kick()
        return self.session.run()

    # ---- packets in -------------------------------------------------------------------

    def _on_packet(self, pkt):
        self.exchange.on_packet(pkt, self.session.batch)

    def _on_interest(self, pkt):
        i = interest.decode_interest(pkt)
        nm = bytes(i.name)
        nonce = control.fetched_nonce(nm, self.prefix)
        if nonce is not None:  # a fetch of one of our messages
            data = self._soft.get(nonce)
            if data is not None:
                asyncio.create_task(self.port.send_quiet(data))
            return
        if nm[: len(control.HELLO)] == control.HELLO:
            self.session.wake.set()
            return
        if nm[: len(_UPDATE)] == _UPDATE:
            import gc

            gc.collect()
            base = gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0  # the updater's cost
            from .updater import start  # loaded only while an update runs

            start(self, nm, base)
            return
        for prefix, handler in self._served:
            if name.is_prefix(prefix, nm):
                content = handler(name.to_uri(nm).encode())
                if content is not None:
                    asyncio.create_task(self.port.send_quiet(_encode_data(nm, as_bytes(content))))
                return
        from pubmote_wire.errors import DecodeError  # here, not a module global: heap

        try:
            topic, publisher, nonce, _, _ = notify.parse_notify_interest(pkt)
        except DecodeError:
            return  # not for us; the bridge routes only our prefix and notifies here
        sub = self._subscriber
        if sub is None:
            from .subscriber import Subscriber

            sub = self._subscriber = Subscriber(self.exchange, self.port, self.counters,
                                                self._deliver)
        asyncio.create_task(sub.on_notify(nm, bytes(topic), bytes(publisher), bytes(nonce),
                                          self.timeout_ms, self.config.get("retries", 3)))

    def _deliver(self, topic_uri, payload, publisher):
        # a message fetched for this board: to the directed inbox, or to every subscription
        # whose filters match it
        if topic_uri[: len(_TO)] == _TO:
            from .directed import deliver

            deliver(self._inbox, payload, self.counters)
            return
        from .subscription import Message

        msg = None
        line = topic_uri + b"|" + payload
        for s in self._subs:
            if s.filter.matches(line):
                if msg is None:
                    msg = Message(topic_uri, payload, self._publisher_uri(publisher))
                s.offer(msg)
        if msg is None:
            self.counters["filtered"] += 1

    def _publisher_uri(self, publisher):
        # the last publisher's URI, made once: its queued messages share one copy
        if publisher != self._last_pub[0]:
            self._last_pub = (publisher, name.to_uri(publisher).encode())
        return self._last_pub[1]


def as_bytes(s):
    return s.encode() if isinstance(s, str) else bytes(s)


def _encode_data(nm, content):
    from pubmote_wire import data

    return data.encode(nm, content, freshness_ms=1000, signer=notify.DIGEST)
