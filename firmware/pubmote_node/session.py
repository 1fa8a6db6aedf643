# The board's session with its bridge: open the link (joining WiFi first where it needs
# it), register and keep registering (a keepalive, and at once when the filters change),
# take the gateway's clock, and reopen the link after any fault, for ever.
import asyncio

from pubmote_wire.compat import const

from .clock import Clock, ticks_ms
from .face import Event, wait_ms

# registrations missed in a row before the board counts itself not connected (and tries
# every _RETRY_MS), and before it takes the bridge for gone (restarted, or the cable
# pulled) and reopens the link
_UNCONNECTED_AFTER = const(2)
_GONE_AFTER = const(6)
_RETRY_MS = const(500)
_KEEPALIVE_MS = const(3000)  # config "keepalive_ms" overrides it
_BACKOFF_MS = const(200)  # the first pause after the link failed to open ...
_BACKOFF_MAX_MS = const(5000)  # ... doubling up to this


class Session:
    """run() keeps the node registered with its bridge. connected, gateway (the bridge's
    name), batch (the link batches, once a bridge takes them), clock (the gateway's time,
    clock.py) and now_ms() say what it learnt; set wake to register again at once.

    What it uses of the node: name, prefix, config, counters, timeout_ms, port, exchange
    and filters(); served is the node's list of (name prefix, handler) it registers too."""

    # the sleep announced (ms, sleep.py) while the board gets ready for it: keepalives say
    # it again, so none tells the bridge it is awake (an instance attribute only then: no
    # slot in every board's session for it)
    sleeping = None

    def __init__(self, node, on_packet, served, signer, key, wlan):
        from pubmote_wire.compat import urandom

        self._node = node
        self._on_packet = on_packet
        self._served = served
        self._signer = signer
        self._key = key
        self.wake = Event()
        self.connected = False
        self.gateway = None
        self.batch = None
        # set from the gateway's clock at registration: by a board with a key only from a
        # reply signed with it; kept through reconnects (docs/protocols/event-time.md)
        self.clock = Clock()
        # drawn once per start-up and sent with every registration: the bridge tells a
        # restarted board (which lost what it was given, e.g. retained last values) from a
        # re-registering one
        self._boot = int.from_bytes(urandom(3), "big")
        # WiFi (tcp/udp links with an ssid): joined before the link opens, rejoined when
        # lost; wifi.py is imported only then, network.WLAN only on a board
        self.wifi = None
        config = node.config
        if config.get("ssid") and config.get("link") in ("tcp", "udp"):
            from . import wifi

            self.wifi = wifi.from_config(config, wlan)

    def now_ms(self):
        """Milliseconds since 1970 by the gateway's clock, else the board's own."""
        t = self.clock.ms(ticks_ms())
        return _local_ms() if t is None else t

    async def run(self):
        """Keep the link up forever: open, register, keep alive, reopen on any fault."""
        node = self._node
        port = node.port
        backoff_ms = _BACKOFF_MS
        while True:
            link = port.link
            if link is None:
                link = _make_link(node.config)
            try:
                if self.wifi is not None:
                    await self.wifi.ensure()  # no address, no link: join first
                await port.open(link)
            except OSError:
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, _BACKOFF_MAX_MS)
                continue
            backoff_ms = _BACKOFF_MS
            reader = asyncio.create_task(port.read_loop(self._on_packet, self.wake))
            # register, then again when woken (filters changed, the bridge's hello) and as a
            # keepalive. Two missed answers in a row: not connected, and a try every 0.5 s;
            # six: the bridge is gone, and the link is reopened (OSError). Here, not in a
            # coroutine of its own: its frame would be the board's heap all the time
            missed = 0
            try:
                while port.up:
                    if await self.register(self.sleeping):
                        missed = 0
                        self.connected = True
                    else:
                        missed += 1
                        if missed >= _UNCONNECTED_AFTER:
                            self.connected = False
                        if missed >= _GONE_AFTER:
                            raise OSError("bridge not answering")
                    self.wake.clear()
                    await wait_ms(self.wake, node.config.get("keepalive_ms", _KEEPALIVE_MS)
                                  if self.connected else _RETRY_MS)
            except OSError:
                pass
            except Exception as e:  # noqa: BLE001 - a bug must not end the board's link for good
                node.counters["errors"] += 1
                _log_exception(e)
            finally:
                self.connected = False
                reader.cancel()
                port.close()
                node.exchange.fail_all()  # their waits end now, as failed
                node.counters["reconnects"] += 1
            await asyncio.sleep(0.2)

    async def register(self, sleep_ms):
        """Register once; True when the bridge answered. sleep_ms: announce that the board
        sleeps that long once answered (sleep.py), else None."""
        # its imports here, not as module globals (each a board's heap): it runs once every
        # few seconds
        from pubmote_wire import control_core as control
        from pubmote_wire import name
        from pubmote_wire.compat import urandom
        from pubmote_wire.errors import DecodeError

        node = self._node
        key = self._key
        # link batches offered in their second form, records with taken-times
        batches = 2 if node.config.get("batch", True) and not key else 0
        params = control.register_params(node.name, name.to_uri(node.prefix), node.filters(),
                                         [name.to_uri(p) for p, _ in self._served], batches,
                                         self._boot, sleep_ms)
        ex = node.exchange
        n = ex.encode(
            control.encode_register, node.name.encode(), params, -1, node.timeout_ms,
            self._signer if key else None, urandom(8) if key else None,
            self.now_ms() if key else None)
        t_sent = ticks_ms()
        p = await ex.express(n, node.timeout_ms, keep=True)
        t_recv = ticks_ms()
        if p is None:
            return False
        node.counters["registrations"] += 1
        _, d, pkt = p
        try:
            self.gateway, gw_ms, form = control.decode_reply(d.content)
            # link batches when both sides take them (docs/protocols/link-batch.md); a
            # batcher keeps the record form (with or without taken-times) it began with
            b = self.batch
            if batches and form:
                if b is None:
                    from .batch_link import Batcher

                    b = self.batch = Batcher(node, form >= 2)
                b.on = form >= 2 or not b.timed
            elif b is not None:
                b.on = False
            if type(gw_ms) is int:
                if key:
                    from pubmote_wire.data import verify_data

                    if not verify_data(d, pkt, key):
                        return True
                self.clock.sync(gw_ms, t_sent, t_recv)
        except (DecodeError, AttributeError, TypeError):
            pass
        return True


def _make_link(config):
    # imported only here: a link given to Node() (a test's, or a CPython virtual board's)
    # needs none of the board-only idioms in links. links only picks the link's module
    # (which stays loaded): it is let go again, as the face lets lp go
    from . import forget, links

    link = links.from_config(config)
    forget("pubmote_node.links")
    return link


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
