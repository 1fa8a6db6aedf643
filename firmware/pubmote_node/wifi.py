# WiFi for the tcp and udp links (ESP32, Pico W): join the network the board's config
# names (ssid, password) before the link opens, again whenever it is lost, with retries
# and capped, jittered back-off; the link state for Node.stats().
# network.WLAN is imported only when no WLAN object is given (on a board), so the same
# code runs on CPython and the unix port in tests with a fake WLAN.
import asyncio

try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


_JOIN_TIMEOUT_MS = const(15000)  # one attempt: WPA2 with DHCP takes 2-8 s
_POLL_MS = const(100)
_BACKOFF_MS = const(500)  # first pause after a failed attempt ...
_BACKOFF_MAX_MS = const(30000)  # ... doubling up to this

# link states, as stats()["wifi"] shows them
DOWN = "down"
JOINING = "joining"
UP = "up"


def _rand16():
    """16 random bits for the jitter: os.urandom where the port has it, else the clock."""
    try:
        import os

        b = os.urandom(2)
        return (b[0] << 8) | b[1]
    except (ImportError, AttributeError, OSError):
        import time

        try:
            return time.ticks_us() & 0xFFFF
        except AttributeError:  # CPython without urandom: never, but stay total
            return int(time.time() * 1000000) & 0xFFFF


async def _sleep_ms(ms):
    await asyncio.sleep(ms / 1000)


class Wifi:
    """Join `ssid` and stay joined: `await wifi.ensure()` returns once the board has an
    address, however many attempts that takes (each bounded by join_timeout_ms, with a
    jittered pause of half to all of the back-off between them; the back-off doubles up
    to backoff_max_ms and starts again after a success)."""

    def __init__(self, ssid, password=None, wlan=None, join_timeout_ms=_JOIN_TIMEOUT_MS,
                 backoff_ms=_BACKOFF_MS, backoff_max_ms=_BACKOFF_MAX_MS, sleep_ms=None,
                 rand16=None):
        if not isinstance(ssid, str) or not 0 < len(ssid) <= 32:
            raise ValueError("ssid: 1 to 32 characters")
        self.ssid = ssid
        self.password = password
        self._wlan = wlan
        self.join_timeout_ms = join_timeout_ms
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self._sleep_ms = sleep_ms or _sleep_ms
        self._rand16 = rand16 or _rand16
        self.state = DOWN
        self.counters = {"wifi_attempts": 0, "wifi_joins": 0, "wifi_failures": 0,
                         "wifi_lost": 0}
        self._next_backoff = backoff_ms

    def wlan(self):
        if self._wlan is None:
            import network  # only boards have it

            self._wlan = network.WLAN(network.STA_IF)
        return self._wlan

    def connected(self):
        up = bool(self.wlan().isconnected())
        if not up and self.state == UP:
            self.state = DOWN
            self.counters["wifi_lost"] += 1
        return up

    def pause_ms(self):
        """The next pause after a failed attempt: half to all of the back-off (jitter, so
        boards that lost the same access point do not retry in step), then double it."""
        b = self._next_backoff
        self._next_backoff = min(b * 2, self.backoff_max_ms)
        return b // 2 + (b // 2) * self._rand16() // 0xFFFF

    async def _attempt(self):
        w = self.wlan()
        self.counters["wifi_attempts"] += 1
        w.active(True)
        try:
            if self.password:
                w.connect(self.ssid, self.password)
            else:
                w.connect(self.ssid)
        except OSError:
            return False
        waited = 0
        while waited < self.join_timeout_ms:
            if w.isconnected():
                return True
            await self._sleep_ms(_POLL_MS)
            waited += _POLL_MS
        return bool(w.isconnected())

    async def ensure(self):
        """Return once joined (at once when already)."""
        if self.connected():
            self.state = UP
            return
        while True:
            self.state = JOINING
            if await self._attempt():
                self.state = UP
                self.counters["wifi_joins"] += 1
                self._next_backoff = self.backoff_ms
                return
            self.counters["wifi_failures"] += 1
            try:
                self.wlan().disconnect()  # a clean start for the next attempt
            except (OSError, AttributeError):
                pass
            self.state = DOWN
            await self._sleep_ms(self.pause_ms())

    def stats(self):
        s = dict(self.counters)
        s["wifi"] = self.state
        try:
            s["ip"] = self.wlan().ifconfig()[0] if self.state == UP else None
        except (OSError, AttributeError):
            s["ip"] = None
        return s


def from_config(cfg, wlan=None):
    """A Wifi for a config with an ssid (tcp/udp links on a board), else None."""
    ssid = cfg.get("ssid")
    if not ssid:
        return None
    return Wifi(ssid, cfg.get("password"), wlan,
                join_timeout_ms=cfg.get("wifi_timeout_ms", _JOIN_TIMEOUT_MS),
                backoff_max_ms=cfg.get("wifi_backoff_max_ms", _BACKOFF_MAX_MS))
