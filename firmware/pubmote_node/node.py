# The board side of pubmote: publish (the NDN notify pub/sub publisher), subscribe with
# nanomsg-style prefix filters, receive, and keep the link to the bridge up by itself.
import asyncio

from pubmote_wire import control, framing, interest, name, notify, tlv
from pubmote_wire.compat import const
from pubmote_wire.errors import DecodeError
from pubmote_wire.rand import urandom
from pubmote_wire.subfilter import SubFilter

MAX_PACKET = 1024  # largest NDN packet on the link; bigger payloads are refused
_SEEN_MAX = const(32)  # messages remembered against duplicate notifies
_NONCE_KEPT = const(8)  # nonce bytes a dedupe slot holds (a longer nonce: its digest's)
_SLOT = const(10)  # a dedupe slot: publisher index (0xFF: empty), nonce length, the bytes
# one outstanding Interest of ours, keyed by its full name: [Event, Data, its packet] (a
# list, not a class: a class object costs the board's heap more than its records do)
_EV = const(0)
_DATA = const(1)
_PKT = const(2)
_INLINE_MAX = const(480)  # message Data up to this size rides inline in its notify
# the node's packet buffers start this small and grow to MAX_PACKET, for good, at the first
# packet that needs it: a board that only sends and receives small messages (a sensor's
# readings, a command) never holds the 2 kB a 1 kB packet each way would take
_TX_START = const(320)  # a registration, a fetch, a small message's notify with its Data
_RX_START = const(256)
# directed messages travel as topics /pubmote/to/<address>; the bridge routes them (a
# const: no module global, which would be heap on a board)
_TO = const(b"/pubmote/to/")
# drawn once per start-up and sent with every registration: the bridge tells a restarted
# board (which lost what it was given, e.g. retained last values) from a re-registering one
_BOOT = int.from_bytes(urandom(3), "big")


class Message:
    """A received message: topic (URI bytes), payload (bytes), publisher (URI bytes)."""

    def __init__(self, topic, payload, publisher):
        self.topic = topic
        self.payload = payload
        self.publisher = publisher

    def __repr__(self):
        return "<Message %s %d B>" % (self.topic, len(self.payload))


class Subscription:
    """Prefix filters with nanomsg SUB semantics and a bounded receive queue."""

    def __init__(self, node, prefixes, queue_len):
        self._node = node
        self.filter = SubFilter()
        self._q = []
        self._qlen = queue_len
        self._ev = asyncio.Event()
        self.dropped = 0
        for p in prefixes:
            self.filter.subscribe(_as_bytes(p))

    def subscribe(self, prefix):
        self.filter.subscribe(_as_bytes(prefix))
        self._node._filters_changed()

    def unsubscribe(self, prefix):
        found = self.filter.unsubscribe(_as_bytes(prefix))
        self._node._filters_changed()
        return found

    def _offer(self, msg):
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
        self._node._drop_subscription(self)


def _as_bytes(s):
    return s.encode() if isinstance(s, str) else bytes(s)


class Node:
    """A board's pubmote endpoint.

    config: {"name": "sim1", "link": "pty"|"uart"|"stdio"|"tcp"|"udp", ...link settings,
    "prefix": "/pubmote/node/<name>" (default), "max_soft": 8, "max_soft_bytes": 4096,
    "queue_len": 16, "timeout_ms": 1500, "retries": 3, "keepalive_ms": 3000, "inline": True}.
    Start it with `asyncio.create_task(node.run())`; publish and subscribe at any time.
    """

    def __init__(self, config, link=None, wlan=None):
        self.name = config["name"]
        self.config = config
        self.prefix = name.from_uri(config.get("prefix", "/pubmote/node/" + self.name))
        self._link = link
        # WiFi (tcp/udp links with an ssid): joined before the link opens, rejoined when
        # lost; wifi.py is imported only then, network.WLAN only on a board
        self._wifi = None
        if config.get("ssid") and config.get("link") in ("tcp", "udp"):
            from . import wifi

            self._wifi = wifi.from_config(config, wlan)
        # max_soft, max_soft_bytes, queue_len, retries, keepalive_ms and inline (small
        # messages inline in their notify: docs/protocols/board-link.md) are read from the
        # config where used: an attribute each would cost the board's heap (this object's
        # table is at a size's edge)
        self.timeout_ms = config.get("timeout_ms", 1500)
        # with a key (from `pubmote deploy --key-file`) the board signs with HmacWithSha256
        key = config.get("key")
        self._key = None
        self._signer = notify.DIGEST  # the codec's one DigestSigner
        if key:
            from binascii import unhexlify

            from pubmote_wire.hmac256 import HmacSigner  # only a board with a key loads HMAC

            self._key = unhexlify(key)

            self._signer = HmacSigner(self._key)
        self._clock_offset_ms = 0  # set from the gateway's clock at registration
        # link batches (batch_link.py), once a bridge accepts them. (Config "inline" is read
        # where it is used: one attribute more would grow this object's dict by 192 B)
        self._batch = None
        # scratch for the packets this board encodes (copied out before any await): it
        # grows to MAX_PACKET at the first packet over _TX_START (self._encode)
        self._tx = bytearray(_TX_START)
        # a byte stream takes a frame in parts: a buffer of one COBS block, not of a whole
        # frame. UDP (one frame per datagram) and a link given here get the whole frame
        udp = config.get("link") == "udp"
        whole = link is not None or udp
        self._frame = bytearray(framing.frame_size_max(MAX_PACKET) if whole
                                else framing.FRAME_PART_MIN)
        # a read takes a whole datagram on UDP (a smaller buffer would cut its frame), 256
        # bytes of a byte stream. (128-byte reads saved 128 B on the Pico, but a unix-port
        # board publishing NDN notifies 4 at a time then ran out of its 256 kB heap; so does
        # the code before this change with 128-byte reads: not understood yet)
        self._rx = bytearray(framing.frame_size_max(MAX_PACKET) if udp else 256)
        # frames up to MAX_PACKET; its buffer grows to that size at the first frame over
        # _RX_START bytes (acks, notifies and small messages' Data fit)
        self._dec = framing.FrameDecoder(framing.frame_size_max(MAX_PACKET), start=_RX_START)
        # one frame at a time on the link (frames go in parts): an Event set while the link
        # is free, not an asyncio.Lock, whose module would cost the board ~370 B of heap
        self._free = asyncio.Event()
        self._free.set()
        self._pending = {}  # full Interest name -> [Event, Data, packet]
        self._soft = {}  # NotifyNonce -> encoded msg Data, until the bridge acks
        # (publisher, NotifyNonce) of the last 32 messages delivered to us (duplicate
        # notifies): a ring of fixed slots in one bytearray (a nonce's length, then its
        # bytes), each slot naming its publisher by an index into _seen_pubs, which holds
        # one copy of each publisher a slot still names. No object per message.
        self._seen = bytearray(b"\xff" * (_SEEN_MAX * _SLOT))
        self._seen_pubs = []
        self._seen_at = 0  # the slot the next message takes
        self._last_pub = (None, None)  # a publisher's name (TLV) and its URI, for Message
        self._subs = []
        self._inbox = None  # directed messages, once the app asks for them (directed())
        self._served = []  # (name prefix, handler): named data this board answers
        self._filters_dirty = asyncio.Event()
        self._up = False
        self.connected = False
        self.gateway = None
        self.counters = {
            "published": 0, "acked": 0, "publish_failed": 0, "soft_full": 0,
            "received": 0, "filtered": 0, "dup_notify": 0, "fetch_failed": 0,
            "sent_frames": 0, "bad_packets": 0, "nacks": 0, "reconnects": 0,
            "registrations": 0, "pending_full": 0, "errors": 0,
        }

    # ---- public API -------------------------------------------------------------------

    def subscribe(self, *prefixes):
        """Subscribe to byte prefixes of `<topic URI>|<payload>` (empty matches all)."""
        sub = Subscription(self, prefixes, self.config.get("queue_len", 16))
        self._subs.append(sub)
        self._filters_changed()
        return sub

    async def publish(self, topic, payload):
        """Publish payload on topic (a URI); return True once the bridge has acked it.

        Returns False (and counts it) when the soft state is full or every retry timed out;
        the message is then forgotten, never half-delivered twice.
        """
        payload = _as_bytes(payload)
        b = self._batch
        if b is not None and b.on:
            ok = await b.publish(topic, payload)
            if ok is not None:
                return ok
        topic_name = name.from_uri(topic) if isinstance(topic, str) else name.from_uri(topic.decode())
        nonce = urandom(4)
        n = self._encode(notify.encode_msg_data, self.prefix, topic_name, nonce, payload,
                         signer=self._signer)
        if n + 64 > MAX_PACKET:
            raise ValueError("payload too large for one packet")
        cfg = self.config
        held = n  # the soft state's bytes, counted here (at most max_soft messages)
        for d in self._soft.values():
            held += len(d)
        if len(self._soft) >= cfg.get("max_soft", 8) or held > cfg.get("max_soft_bytes", 4096):
            self.counters["soft_full"] += 1
            return False
        data = bytes(memoryview(self._tx)[0:n])
        self._soft[nonce] = data
        self.counters["published"] += 1
        # a small message rides in the notify itself: the bridge acks it without fetching
        # (one round trip instead of two); a bridge that does not know INLINE_MSG fetches
        inline = data if cfg.get("inline", True) and n <= _INLINE_MAX else None
        try:
            for _ in range(cfg.get("retries", 3) + 1):
                n = self._encode(
                    notify.encode_notify_interest, topic_name, self.prefix, nonce,
                    lifetime_ms=self.timeout_ms, signer=self._signer,
                    sig_nonce=urandom(8) if self._key else None,
                    sig_time_ms=self._now_ms() if self._key else None, inline=inline)
                if await self._express(n) is not None:
                    self.counters["acked"] += 1
                    return True
            self.counters["publish_failed"] += 1
            return False
        finally:
            self._soft.pop(nonce, None)
            if not self._soft:
                self._soft.clear()  # frees its grown table, as in _express

    def directed(self):
        """The queue of directed messages for this board: `msg = await q.recv()` gives a
        Directed. Messages the bridge addresses here arrive whatever the filters are."""
        if self._inbox is None:
            self._inbox = Subscription(self, (), self.config.get("queue_len", 16))
        return self._inbox

    async def send(self, address, topic, payload):
        """Send a directed message to address: "/orch/node" (one board),
        "/orch" (a gateway), "/orch/*" (a gateway and its boards), "/*" (every gateway),
        "/*/*" (everything). A board the address matches gets its own copy here (nothing
        comes back from the bridge). True once the bridge has acked it (or nothing had to
        leave the board), False when publishing failed."""
        from .directed import own_copy

        payload = _as_bytes(payload)
        if own_copy(self, address, topic, payload):
            return True  # for this board only: it never leaves
        return await self.publish("/pubmote/to" + address, _as_bytes(topic) + b"|" + payload)

    def orch(self):
        """The name of this board's gateway (its orch, as addresses spell it), once known."""
        if not self.gateway:
            return None
        return self.gateway.rsplit("/", 1)[-1]

    def serve(self, prefix, handler):
        """Answer Interests under prefix (a URI): handler(name_uri_bytes) returns the
        content as bytes, or None to stay silent. The bridge routes them here, so NDN apps
        fetch the board's named data with an ordinary Interest."""
        if len(self._served) >= 8:
            raise ValueError("at most 8 served prefixes")
        self._served.append((name.from_uri(prefix), handler))
        self._filters_changed()

    def stats(self):
        """Counters, link state and queue depths, for the app and the bridge's view."""
        s = dict(self.counters)
        s["connected"] = self.connected
        s["soft_state"] = len(self._soft)
        s["pending"] = len(self._pending)
        s["sub_dropped"] = sum(x.dropped for x in self._subs)
        s["frames_bad"] = self._dec.frames_bad_crc + self._dec.frames_bad_cobs + self._dec.frames_oversize
        if self._wifi is not None:
            s.update(self._wifi.stats())
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

    # ---- connectivity -----------------------------------------------------------------

    async def run(self):
        """Keep the link up forever: open, register, keep alive, reopen on any fault."""
        backoff_ms = 200
        while True:
            link = self._link
            if link is None:
                # imported only here: a link given to Node() (a test's, or a CPython
                # virtual board's) needs none of the board-only idioms in links
                from . import links

                link = links.from_config(self.config)
                # links only picks the link's module (which stays loaded): let it go again,
                # as _lp_parts does lp (kept, ~0.3 kB of the board's heap for good)
                del links
                import sys

                import pubmote_node

                sys.modules.pop("pubmote_node.links", None)
                if hasattr(pubmote_node, "links"):
                    delattr(pubmote_node, "links")
            try:
                if self._wifi is not None:
                    await self._wifi.ensure()  # no address, no link: join first
                await link.open()
            except OSError:
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, 5000)
                continue
            backoff_ms = 200
            self._link = link
            self._up = True
            reader = asyncio.create_task(self._read_loop(link))
            try:
                await self._session()
            except OSError:
                pass
            except Exception as e:  # noqa: BLE001 - a bug must not end the board's link for good
                self.counters["errors"] += 1
                _log_exception(e)
            finally:
                self._up = False
                self.connected = False
                reader.cancel()
                link.close()
                for p in self._pending.values():  # their waits end now, as failed
                    p[_EV].set()
                self._pending = {}
                self.counters["reconnects"] += 1
            await asyncio.sleep(0.2)

    async def _session(self):
        # register, then re-register on filter changes and as a keepalive; two missed
        # keepalives in a row mean the bridge is gone (restarted, or the cable pulled)
        missed = 0
        while self._up:
            ok = await self._register()
            if ok:
                missed = 0
                self.connected = True
            else:
                missed += 1
                if missed >= 2:
                    self.connected = False
                if missed >= 6:
                    raise OSError("bridge not answering")
            self._filters_dirty.clear()
            await _wait(self._filters_dirty,
                        self.config.get("keepalive_ms", 3000) if self.connected else 500)

    async def _register(self):
        batches = self.config.get("batch", True) and not self._key
        params = control.register_params(self.name, name.to_uri(self.prefix), self.filters(),
                                         [name.to_uri(p) for p, _ in self._served], batches,
                                         _BOOT)
        n = self._encode(
            control.encode_register, self.name.encode(), params, -1, self.timeout_ms,
            self._signer if self._key else None, urandom(8) if self._key else None,
            self._now_ms() if self._key else None)
        p = await self._express(n, keep=True)
        if p is None:
            return False
        self.counters["registrations"] += 1
        try:
            self.gateway, gw_ms, taken = control.decode_reply(p[_DATA].content)
            # link batches when both sides take them (docs/protocols/link-batch.md)
            if batches and taken:
                if self._batch is None:
                    from .batch_link import Batcher

                    self._batch = Batcher(self)
                self._batch.on = True
            elif self._batch is not None:
                self._batch.on = False
            if gw_ms and self._key:
                from pubmote_wire.data import verify_data

                if verify_data(p[_DATA], p[_PKT], self._key):
                    self._clock_offset_ms = gw_ms - _local_ms()
        except (DecodeError, AttributeError, TypeError):
            pass
        return True

    def _now_ms(self):
        """Milliseconds since 1970 by the gateway's clock (boards may have none)."""
        return _local_ms() + self._clock_offset_ms

    def _filters_changed(self):
        self._filters_dirty.set()

    def _drop_subscription(self, sub):
        if sub in self._subs:
            self._subs.remove(sub)
            self._filters_changed()

    def _encode(self, fn, *args, **kw):
        # fn(buf, 0, ...) into the scratch buffer: it starts at _TX_START bytes (the
        # packets of small messages, registrations and fetches fit) and grows to
        # MAX_PACKET, for good, at the first packet that does not fit
        while True:
            try:
                return fn(self._tx, 0, *args, **kw)
            except ValueError:  # EncodeError: the buffer is too small, or the packet is
                if len(self._tx) >= MAX_PACKET:
                    raise
                self._tx = bytearray(MAX_PACKET)

    # ---- packets ----------------------------------------------------------------------

    async def _send(self, pkt, framer=None):
        # framer (link batches): framer(self._frame) frames what it holds once the link is
        # ours and returns the frame's length, written at once (0: nothing to write)
        if not self._up:
            raise OSError("link down")
        while not self._free.is_set():
            await self._free.wait()
        self._free.clear()
        try:
            if framer is not None:
                n = framer(self._frame)
                if n:
                    await self._link.write(memoryview(self._frame)[0:n])
                pos = -1
            else:
                crc = framing.crc16(pkt)
                pos = 0
            while pos >= 0:  # one part when the frame fits the buffer
                n, pos = framing.encode_frame_part(self._frame, pkt, crc, pos)
                await self._link.write(memoryview(self._frame)[0:n])
            self.counters["sent_frames"] += 1
        finally:
            self._free.set()

    async def _express(self, n, keep=False):
        """Send the Interest in self._tx[0:n]; wait for its Data (None on timeout/Nack);
        with keep, return the pending record (Data and its packet) instead.

        The packet is copied before the first await: other tasks encode into self._tx."""
        pkt = bytes(memoryview(self._tx)[0:n])
        full = _interest_name(pkt, n)
        if full in self._pending or len(self._pending) >= 16:
            self.counters["pending_full"] += 1
            return None
        p = [asyncio.Event(), None, None]
        self._pending[full] = p
        try:
            await self._send(pkt)
            await _wait(p[_EV], self.timeout_ms)
            if p[_DATA] is None:  # timed out, or Nacked
                return None
            return p if keep else p[_DATA]
        except OSError:
            return None
        finally:
            self._pending.pop(full, None)
            # a dict keeps its grown table when emptied: after a burst of fetches (up to
            # 16 pending) the last one out frees it (clear() does; ~100 B back)
            if not self._pending:
                self._pending.clear()

    async def _read_loop(self, link):
        rx = self._rx
        mv = memoryview(rx)
        while True:
            try:
                n = await link.readinto(rx)
            except Exception:  # noqa: BLE001 - any link fault: reopen rather than hang
                n = 0
            if not n:
                self._up = False
                self._filters_dirty.set()  # wake the session so it notices
                return
            # each packet handled as the decoder finds it: no list of packets, and none
            # held by this frame while it waits for the next bytes
            self._dec.feed_cb(mv[0:n], self._on_packet)

    def _on_packet(self, pkt):
        # a decoded frame (a view of the decoder's buffer: ACKS are read in place, any
        # other packet is copied, as it is kept or parsed by the NDN codec), or an LP
        # packet's fragment
        try:
            typ = pkt[0] if pkt else -1
            if typ != 0xC1:
                pkt = bytes(pkt)
            if typ == 0x06:
                d = _decode_data(pkt)
                p = self._pending.get(bytes(d.name))
                if p is not None:
                    p[_DATA] = d
                    p[_PKT] = pkt
                    p[_EV].set()
            elif typ == 0x05:
                self._on_interest(pkt)
            elif typ == 0xC1:  # batch.ACKS: the bridge acks link batches
                if self._batch is not None:
                    self._batch.on_acks(pkt)
            elif typ == 0x64:
                nack, fragment = _lp_parts(pkt)
                if nack and fragment is not None:
                    self.counters["nacks"] += 1
                    i = interest.decode_interest(fragment)
                    p = self._pending.get(bytes(i.name))
                    if p is not None:
                        p[_EV].set()
                elif fragment is not None:
                    self._on_packet(fragment)
            else:
                raise DecodeError("not an NDN packet")
        except DecodeError:
            self.counters["bad_packets"] += 1

    def _on_interest(self, pkt):
        i = interest.decode_interest(pkt)
        nm = bytes(i.name)
        nonce = control.fetched_nonce(nm, self.prefix)
        if nonce is not None:  # a fetch of one of our messages
            data = self._soft.get(nonce)
            if data is not None:
                asyncio.create_task(self._send_quiet(data))
            return
        if nm[: len(control.HELLO)] == control.HELLO:
            self._filters_dirty.set()
            return
        for prefix, handler in self._served:
            if name.is_prefix(prefix, nm):
                content = handler(name.to_uri(nm).encode())
                if content is not None:
                    pkt = _encode_data(nm, _as_bytes(content))
                    asyncio.create_task(self._send_quiet(pkt))
                return
        try:
            topic, publisher, nonce, fwd, _ = notify.parse_notify_interest(pkt)
        except DecodeError:
            return  # not for us; the bridge routes only our prefix and notifies here
        asyncio.create_task(self._on_notify(nm, bytes(topic), bytes(publisher), bytes(nonce)))

    async def _send_quiet(self, data):
        try:
            await self._send(data)
        except OSError:
            pass

    async def _on_notify(self, notify_name, topic, publisher, nonce):
        # NDN notify pub/sub as the subscriber: fetch /<publisher>/msg/<topic>/<nonce>, deliver, ack
        if self._was_seen(publisher, nonce):
            self.counters["dup_notify"] += 1
            await self._ack(notify_name)
            return
        data = None
        for _ in range(self.config.get("retries", 3)):
            # the codec picks a random Interest nonce
            n = self._encode(notify.encode_msg_interest, publisher, topic, nonce,
                             lifetime_ms=self.timeout_ms)
            data = await self._express(n)
            if data is not None:
                break
        if data is None:
            self.counters["fetch_failed"] += 1
            return
        self._remember(publisher, nonce)
        topic_uri = name.to_uri(topic).encode()
        payload = bytes(data.content) if data.content is not None else b""
        self.counters["received"] += 1
        if topic_uri[: len(_TO)] == _TO:
            from .directed import deliver

            deliver(self, payload)
            await self._ack(notify_name)
            return
        msg = None
        line = topic_uri + b"|" + payload
        for s in self._subs:
            if s.filter.matches(line):
                if msg is None:
                    msg = Message(topic_uri, payload, self._publisher_uri(publisher))
                s._offer(msg)
        if msg is None:
            self.counters["filtered"] += 1
        await self._ack(notify_name)

    def _publisher_uri(self, publisher):
        # the last publisher's URI, made once: its queued messages share one copy
        if publisher != self._last_pub[0]:
            self._last_pub = (publisher, name.to_uri(publisher).encode())
        return self._last_pub[1]

    def _was_seen(self, publisher, nonce):
        k = _index(self._seen_pubs, publisher)
        if k < 0:
            return False
        key = _nonce_key(nonce)
        seen = self._seen
        n = len(key)
        for p in range(0, _SEEN_MAX * _SLOT, _SLOT):
            if seen[p] != k or seen[p + 1] != len(nonce) & 0xFF:
                continue
            i = 0
            while i < n and seen[p + 2 + i] == key[i]:
                i += 1
            if i == n:
                return True
        return False

    def _remember(self, publisher, nonce):
        at = self._seen_at
        self._seen_at = (at + 1) % _SEEN_MAX
        seen = self._seen
        p = at * _SLOT
        seen[p] = 0xFF  # the oldest slot is taken over: it no longer names its publisher
        pubs = self._seen_pubs
        k = _index(pubs, publisher)
        if k < 0:
            # the first index no slot names (a forgotten publisher's), else a new one
            k = 0
            while k < len(pubs) and _names(seen, k):
                k += 1
            if k == len(pubs):
                pubs.append(publisher)
            else:
                pubs[k] = publisher
        key = _nonce_key(nonce)
        seen[p] = k
        seen[p + 1] = len(nonce) & 0xFF
        seen[p + 2 : p + 2 + len(key)] = key

    async def _ack(self, notify_name):
        try:
            await self._send(control.encode_ack(notify_name))
        except OSError:
            pass


def _local_ms():
    import time

    try:
        return time.time_ns() // 1000000
    except AttributeError:
        return int(time.time() * 1000)


def _log_exception(e):
    import sys

    if hasattr(sys, "print_exception"):
        sys.print_exception(e)
    else:  # CPython
        import traceback

        traceback.print_exception(e)


def _index(items, x):
    for k in range(len(items)):
        if items[k] == x:
            return k
    return -1


def _names(seen, k):
    # True if a dedupe slot names publisher index k
    for p in range(0, _SEEN_MAX * _SLOT, _SLOT):
        if seen[p] == k:
            return True
    return False


async def _wait(ev, ms):
    # wait for ev, at most ms: a timer task sets it (asyncio.wait_for would load funcs.py,
    # ~0.4 kB of the board's heap, and make a task and a closure per wait besides)
    timer = asyncio.create_task(_set_after(ev, ms))
    try:
        await ev.wait()
    finally:
        timer.cancel()


async def _set_after(ev, ms):
    await asyncio.sleep(ms / 1000)
    ev.set()


def _nonce_key(nonce):
    # what a dedupe slot keeps of a nonce: the nonce itself up to 8 bytes (every NotifyNonce
    # in use: ndn-python-repo's is an 8-byte-at-most integer, the bridge's 4 bytes), else the
    # first 8 bytes of its SHA-256 (with its length: a false match needs a 2**-64 collision)
    if len(nonce) <= _NONCE_KEPT:
        return nonce
    from pubmote_wire.compat import sha256

    return sha256(nonce).digest()[:_NONCE_KEPT]


def _interest_name(buf, n):
    r = tlv.TLVReader(buf, 0, n)
    r.expect(0x05)
    r2 = tlv.TLVReader(buf, r.vstart, r.vend)
    r2.expect(0x07)
    return bytes(buf[r2.vstart : r2.vend])


def _encode_data(nm, content):
    from pubmote_wire import data

    return data.encode(nm, content, freshness_ms=1000, signer=notify.DIGEST)


def _lp_parts(pkt):
    # (a Nack?, the Fragment as bytes or None) of an NDNLPv2 packet. LpPackets reach a board
    # only as the bridge's Nack of a fetch it no longer serves, now and then: lp is loaded
    # for one and, if this loaded it, let go again: kept, it would hold ~1 kB of heap for
    # good from the first Nack on (a step in the board's steady state)
    import sys

    loaded = "pubmote_wire.lp" in sys.modules
    from pubmote_wire import lp

    try:
        pk = lp.decode_lp(pkt)
        fragment = bytes(pk.fragment) if pk.fragment is not None else None
        return pk.nack_reason is not None, fragment
    finally:
        if not loaded:
            import pubmote_wire

            sys.modules.pop("pubmote_wire.lp", None)
            if hasattr(pubmote_wire, "lp"):
                delattr(pubmote_wire, "lp")


def _decode_data(pkt):
    from pubmote_wire import data

    return data.decode_data(pkt)
