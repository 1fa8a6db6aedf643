# The board's clock for event time (docs/protocols/event-time.md): the gateway's time
# (ms since 1970), taken from each registration reply and carried forward by the board's
# millisecond ticks, so it keeps running through reconnects and outages. A message is
# stamped with the ticks when the app publishes it; its time is worked out when it is
# sent, so a reading queued before the clock was first synced still gets its time.
# Small ints only (a 32-bit board's small int holds 30 bits, ms since 1970 need 41): the
# sync point is hi * 2**24 + lo ms and the ticks at that point.
from pubmote_wire.compat import const

try:
    from time import ticks_add, ticks_diff, ticks_ms
except ImportError:  # CPython (host tests of the node): the ports' 2**30 ms period
    from time import monotonic

    def ticks_ms():
        return int(monotonic() * 1000) & 0x3FFFFFFF

    def ticks_diff(a, b):
        return ((a - b + 0x20000000) & 0x3FFFFFFF) - 0x20000000

    def ticks_add(a, d):
        return (a + d) & 0x3FFFFFFF


_LO = const(0xFFFFFF)
# a kept sync's uncertainty grows by 1 ms every _DRIFT ms of ticks (100 ppm: a board's
# crystal or resonator), so a fresher sample with a longer round trip replaces it in time
_DRIFT = const(10000)
# a sample this far (ms) beyond both uncertainties means the gateway's clock stepped (or
# the board moved to another gateway): it is taken at once
_STEP_MS = const(1000)
# older than this (ms of ticks, well inside ticks_diff's range of 2**29), a sync is
# replaced by the next sample, and moved on to now by the next reading of the clock: a
# board cut off from its gateway for days keeps its time
_MAX_AGE_MS = const(0x8000000)


class Clock:
    """synced is False until a gateway's time was taken; value(stamp) and ms(stamp) give
    the time of a ticks_ms() stamp (None before)."""

    def __init__(self):
        self.synced = False
        self._hi = 0
        self._lo = 0
        self._ticks = 0
        self._unc = 0
        self._buf = bytearray(8)

    def sync(self, gw_ms, t_sent, t_recv):
        """Take the gateway's time gw_ms from a reply to a request sent at ticks t_sent and
        answered at t_recv: it is the time at the round trip's midpoint. A sample is kept
        while no later one is surer (a shorter round trip, or the old one has drifted)."""
        rtt = ticks_diff(t_recv, t_sent)
        if rtt < 0 or gw_ms < 0:
            return
        mid = ticks_add(t_sent, rtt // 2)
        unc = rtt // 2 + 1
        if self.synced:
            age = ticks_diff(mid, self._ticks)
            old = self._unc + age // _DRIFT
            if 0 <= age < _MAX_AGE_MS and unc > old:
                # keep the old one, unless the gateway's clock says it is off by far more
                # than both could be
                hi = gw_ms >> 24
                lo = gw_ms & _LO
                d = ((hi - self._hi) << 24) + lo - self._lo - age
                if -_STEP_MS - unc - old < d < _STEP_MS + unc + old:
                    return
        self._hi = gw_ms >> 24
        self._lo = gw_ms & _LO
        self._ticks = mid
        self._unc = unc
        self.synced = True

    def _move_on(self):
        # the sync point, once old, moved to now (its uncertainty grown by the drift), so
        # ticks_diff against it never wraps however long the board goes without a sample
        now = ticks_ms()
        age = ticks_diff(now, self._ticks)
        if age > _MAX_AGE_MS:
            lo = self._lo + age
            self._hi += lo >> 24
            self._lo = lo & _LO
            self._ticks = now
            self._unc += age // _DRIFT

    def value(self, stamp):
        """The time of stamp as the 8 bytes of a NonNegativeInteger (a buffer of the
        clock's, valid until the next call), or None when not synced or stamp is None."""
        if not self.synced or stamp is None:
            return None
        self._move_on()
        lo = self._lo + ticks_diff(stamp, self._ticks)
        hi = self._hi + (lo >> 24)
        lo &= _LO
        b = self._buf
        b[0] = 0
        b[1] = 0
        b[2] = (hi >> 16) & 0xFF
        b[3] = (hi >> 8) & 0xFF
        b[4] = hi & 0xFF
        b[5] = lo >> 16
        b[6] = (lo >> 8) & 0xFF
        b[7] = lo & 0xFF
        return b

    def stamp_of(self, t):
        """The ticks stamp of a time t given as value() gives it (8 bytes: a record the
        durable outbox kept through a reboot), or None when not synced or too far from now
        for the ticks to tell."""
        if not self.synced or len(t) != 8:
            return None
        self._move_on()
        hi = (t[2] << 16) | (t[3] << 8) | t[4]
        lo = (t[5] << 16) | (t[6] << 8) | t[7]
        if hi - self._hi > 8 or self._hi - hi > 8:  # beyond _MAX_AGE_MS, and no long ints
            return None
        d = ((hi - self._hi) << 24) + lo - self._lo
        if d > _MAX_AGE_MS or d < -_MAX_AGE_MS:
            return None
        return ticks_add(self._ticks, d)

    def uncertainty(self, stamp):
        """How far (ms) the time of stamp may be off: half the kept sample's round trip,
        grown by the drift since (or until) it; None when not synced."""
        if not self.synced:
            return None
        self._move_on()
        age = ticks_diff(stamp, self._ticks)
        return self._unc + (age if age > 0 else -age) // _DRIFT

    def ms(self, stamp):
        """The time of stamp in ms since 1970 (an int; a long int on a 32-bit board), or
        None when not synced."""
        if not self.synced:
            return None
        self._move_on()
        return (self._hi << 24) + self._lo + ticks_diff(stamp, self._ticks)
