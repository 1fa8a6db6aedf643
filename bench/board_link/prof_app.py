# Profiling app (MicroPython, run as a simulated board's app by bench/board_link/profile.py):
# the bench app's publishing lanes, with ticks_us timers wrapped around each codec, framing
# and link step the node takes, so the board's share of a message's time is measured where
# it is spent. Prints "PROF <step> <total us> <calls>" lines after the RESULT line.
from time import ticks_diff, ticks_us

import lat
import pubmote_pub

from pubmote_node import face, link_pty
from pubmote_wire import batch, framing, notify

_acc = {}


def _add(label, t0):
    a = _acc.get(label)
    if a is None:
        a = _acc[label] = [0, 0]
    a[0] += ticks_diff(ticks_us(), t0)
    a[1] += 1


def _timed(label, f):
    def g(*args, **kw):
        t0 = ticks_us()
        try:
            return f(*args, **kw)
        finally:
            _add(label, t0)

    return g


def _timed_async(label, f):
    async def g(*args, **kw):
        t0 = ticks_us()
        try:
            return await f(*args, **kw)
        finally:
            _add(label, t0)

    return g


def _stat(pid):
    # (utime + stime in clock ticks, parent pid) from /proc/<pid>/stat
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), fields[1]


def _cpu_ms():
    # CPU time of this board and of its parent, the bridge (10 ms ticks)
    mine, ppid = _stat("self")
    return mine * 10, _stat(ppid)[0] * 10


def _wrap_module(mod, names):
    for n in names:
        if hasattr(mod, n):
            setattr(mod, n, _timed(n, getattr(mod, n)))


async def main(node):
    if node.config.get("steps", True):
        _wrap_steps(node)
    _cpu_around_run()
    await pubmote_pub.main(node)


def _wrap_steps(node):
    _wrap_module(notify, ("encode_msg_data", "encode_notify_interest", "encode_ack_data",
                          "encode_compact"))
    _wrap_module(framing, ("crc16", "encode_frame_part", "encode_frame"))
    _wrap_module(batch, ("add_record", "frame_inplace", "ack_runs"))
    _wrap_module(face, ("_decode_data", "_interest_name"))
    link_pty.PtyLink.write = _timed_async("link.write", link_pty.PtyLink.write)
    link_pty.PtyLink.readinto = _timed_async("link.readinto(await)", link_pty.PtyLink.readinto)
    node.port.decoder.feed_cb = _timed("deframe(feed)", node.port.decoder.feed_cb)
    node.exchange.on_packet = _timed("on_packet", node.exchange.on_packet)
    node.port.send = _timed_async("send(await)", node.port.send)
    node.publish = _timed_async("publish(await)", node.publish)


def _cpu_around_run():
    report = lat.Hist.report
    init = lat.Hist.__init__
    cpu0 = []

    def init_then_cpu(h):
        # the bench app makes its histogram when the warm-up ends: measure from there
        init(h)
        cpu0.extend(_cpu_ms())

    def report_then_prof(h, *args):
        # the profile first: the bench stops reading the board's log at its RESULT line
        for k in sorted(_acc):
            print("PROF %s %d %d" % (k, _acc[k][0], _acc[k][1]))
        cpu1 = _cpu_ms()
        print("CPU board_ms=%d bridge_ms=%d" % (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]))
        report(h, *args)

    lat.Hist.__init__ = init_then_cpu
    lat.Hist.report = report_then_prof
