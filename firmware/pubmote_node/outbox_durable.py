# The durable outbox (config "outbox_dir"): the outbox (outbox.py) with every queued message
# kept on the filesystem by outlog.py until it leaves, and at boot the messages a reboot
# left there queued again. With "outbox_log_bytes" too, the RAM's bounds hold the oldest
# messages and the newer wait in the log only, read back in order as the head leaves (the
# log is then the bound, in bytes). A module of its own: a board without it holds none of
# this code's functions.
from pubmote_wire.compat import const

from .outbox import Outbox, _heap_low

_LEN = const(64)  # outbox.py's defaults
_BYTES = const(4096)


class DurableOutbox(Outbox):
    """Outbox, its messages on flash until they leave (a filesystem that fails at boot:
    counted in outbox_log_failed, and the outbox is in RAM only)."""

    def __init__(self, node, send):
        from .outlog import OutLog

        Outbox.__init__(self, node, send)
        node.counters["outbox_log_failed"] = 0
        # what a reboot left, taken in as it is read (the heap's bound applies: a log
        # larger than the heap holds drops its oldest, counted, instead of failing).
        # "{name}": boards that share a filesystem (simulated ones) each keep their own
        self._log = OutLog(node.config["outbox_dir"].replace("{name}", node.name))
        # with outbox_log_bytes the RAM's bounds hold the oldest messages, the newer wait
        # on flash only, up to that many bytes of log
        self._spill = node.config.get("outbox_log_bytes") or 0
        self._spilled = 0
        try:
            self._log.replay(self._replayed)
        except OSError:  # no filesystem there: the board runs, its outbox in RAM
            node.counters["outbox_log_failed"] += 1
            self._log = None
            self._spill = 0
            self._spilled = 0

    def _replayed(self, fields):
        # False: left on flash (past the RAM's bounds, with outbox_log_bytes)
        size = len(fields[0]) + len(fields[1])
        if self._spill and (self._spilled or self._full(size)):
            self._spilled += 1
            return False
        self._room(size)
        self._hold(fields[0].decode(), fields[1],
                   fields[2] if len(fields) > 2 and fields[2] else None)
        return True

    def _take(self, topic, payload, stamp, size):
        if self._spill and (self._spilled or self._full(size)):
            # past the RAM's bounds: on flash only, taken into RAM as the head leaves
            if self._append(topic, payload, stamp, False):
                self._spilled += 1
                self._bound_log()
            else:  # neither on flash nor in RAM
                self._node.counters["outbox_dropped"] += 1
            return
        self._room(size)
        if self._log is not None:
            # on flash before the app hears "queued" (after the drops: its record carries
            # the cursor past them)
            self._append(topic, payload, stamp, True)
        self._hold(topic, payload, stamp)

    def _append(self, topic, payload, stamp, held):
        t = topic.encode() if isinstance(topic, str) else topic
        taken = self._node.session.clock.value(stamp)
        if taken is not None:
            fields = (t, payload, taken)
        else:  # no time yet: the ticks, which a message loaded in this boot can still use
            fields = (t, payload, b"", stamp.to_bytes(4, "little") if stamp is not None else b"")
        if self._log.append(fields, held):
            return True
        self._node.counters["outbox_log_failed"] += 1
        return False

    def _full(self, size):
        cfg = self._node.config
        return self._q and (len(self._q) // 2 >= cfg.get("outbox_len", _LEN)
                            or self._bytes + size > cfg.get("outbox_bytes", _BYTES)
                            or _heap_low())

    def _bound_log(self):
        # the flash bound: the oldest dropped (counted) until the log is within it
        log = self._log
        while log.size() > self._spill:
            if not self._q:
                self._refill()
                if not self._q:
                    break
            self._pop()
            self._node.counters["outbox_dropped"] += 1
        self._refill()

    def _refill(self):
        # messages on flash only taken into RAM, oldest first, while the RAM's bounds allow
        if not self._spilled:
            return
        log = self._log
        for seq, fields in log.spilled():
            if not self._spilled or self._full(len(fields[0]) + len(fields[1])):
                return
            stamp = fields[2] if len(fields) > 2 and fields[2] else None
            if stamp is None and len(fields) > 3 and len(fields[3]) == 4 and log.this_boot(seq):
                stamp = int.from_bytes(fields[3], "little")
            self._hold(fields[0].decode(), fields[1], stamp)
            self._spilled -= 1
            log.took(seq)

