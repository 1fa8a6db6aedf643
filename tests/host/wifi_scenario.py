# The WiFi join's behaviour with a fake WLAN, written once for CPython (pytest imports it)
# and the MicroPython unix port (run as a script): no f-strings, nothing CPython-only.
import asyncio

from pubmote_node import wifi


class FakeWlan:
    """network.WLAN's station calls; `fail` attempts time out before one that joins after
    `polls` checks of isconnected()."""

    def __init__(self, fail=0, polls=2):
        self.fail = fail
        self.polls = polls
        self.calls = []
        self._left = -1
        self.up = False

    def active(self, on=None):
        self.calls.append(("active", on))
        return True

    def connect(self, ssid, password=None):
        self.calls.append(("connect", ssid) if password is None else ("connect", ssid, password))
        if self.fail > 0:
            self.fail -= 1
            self._left = -1  # this attempt never joins
        else:
            self._left = self.polls

    def isconnected(self):
        if self._left == 0:
            self.up = True
        elif self._left > 0:
            self._left -= 1
        return self.up

    def disconnect(self):
        self.calls.append(("disconnect",))
        self.up = False
        self._left = -1

    def ifconfig(self):
        return ("192.168.1.50", "255.255.255.0", "192.168.1.1", "192.168.1.1")

    def drop(self):
        self.up = False
        self._left = -1


def scenario():
    """Run every case; return the facts the tests check (a dict of plain values)."""
    out = {}
    slept = []

    async def sleep_ms(ms):
        slept.append(ms)
        await asyncio.sleep(0)

    # three attempts time out, the fourth joins
    w = FakeWlan(fail=3, polls=2)
    j = wifi.Wifi("greenhouse", "pw-12345678", w, join_timeout_ms=1000, backoff_ms=400,
                  backoff_max_ms=1000, sleep_ms=sleep_ms, rand16=lambda: 0xFFFF)
    out["state_before"] = j.state
    asyncio.run(j.ensure())
    out["state"] = j.state
    out["counters"] = dict(j.counters)
    out["connects"] = [c for c in w.calls if c[0] == "connect"]
    # the pauses between attempts (not the 100 ms polls): 400, 800, then capped at 1000
    out["pauses"] = [ms for ms in slept if ms != 100]
    out["polls_per_failed_attempt"] = 1000 // 100
    out["stats"] = j.stats()
    # already joined: nothing to do
    n = len(w.calls)
    asyncio.run(j.ensure())
    out["calls_when_up"] = len(w.calls) - n
    # the access point goes away: seen as lost, joined again, back-off started afresh
    w.drop()
    out["connected_after_drop"] = j.connected()
    out["state_after_drop"] = j.state
    del slept[:]
    asyncio.run(j.ensure())
    out["state_after_rejoin"] = j.state
    out["counters_after_rejoin"] = dict(j.counters)
    # jitter: half to all of the back-off, never more than the cap
    k = wifi.Wifi("x", None, FakeWlan(), backoff_ms=1000, backoff_max_ms=8000,
                  rand16=lambda: 0)
    out["pauses_low"] = [k.pause_ms() for _ in range(6)]
    k = wifi.Wifi("x", None, FakeWlan(), backoff_ms=1000, backoff_max_ms=8000,
                  rand16=lambda: 0xFFFF)
    out["pauses_high"] = [k.pause_ms() for _ in range(6)]
    # an open network: connect(ssid) without a password
    w = FakeWlan()
    asyncio.run(wifi.Wifi("cafe", None, w, sleep_ms=sleep_ms).ensure())
    out["open_connect"] = [c for c in w.calls if c[0] == "connect"]
    out["no_ssid"] = wifi.from_config({"link": "tcp", "host": "h", "port": 1}) is None
    try:
        wifi.Wifi("", None, FakeWlan())
        out["empty_ssid"] = "accepted"
    except ValueError:
        out["empty_ssid"] = "refused"
    return out


class _Link:
    """A link that records when it was opened, and never carries anything."""

    def __init__(self, wlan):
        self.wlan = wlan
        self.opened_with_wifi = []
        self._nothing = asyncio.Event()  # never set: a read waits until the node cancels it

    async def open(self):
        self.opened_with_wifi.append(self.wlan.up)

    async def readinto(self, buf):
        await self._nothing.wait()
        return 0

    async def write(self, mv):
        pass

    def close(self):
        pass


def node_scenario():
    """A Node on a tcp link with an ssid joins WiFi before it opens the link, and shows the
    link state in stats()."""
    from pubmote_node.node import Node

    w = FakeWlan(fail=1, polls=1)
    link = _Link(w)
    cfg = {"name": "esp1", "link": "tcp", "host": "192.168.1.5", "port": 6365,
           "ssid": "greenhouse", "password": "pw-12345678", "wifi_timeout_ms": 300,
           "wifi_backoff_max_ms": 20}
    node = Node(cfg, link=link, wlan=w)
    out = {"stats_before": node.stats()["wifi"]}

    async def main():
        task = asyncio.create_task(node.run())
        for _ in range(1000):
            if link.opened_with_wifi:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    s = node.stats()
    out["opened_with_wifi"] = link.opened_with_wifi
    out["wifi"] = s["wifi"]
    out["ip"] = s["ip"]
    out["wifi_failures"] = s["wifi_failures"]
    return out


if __name__ == "__main__":
    print("SCENARIO", repr(scenario()))
    print("NODE", repr(node_scenario()))
