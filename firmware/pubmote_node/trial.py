# An app on trial after an update: healthy once it has registered and stayed registered for
# grace_s seconds, or has had a publish acked, within timeout_s of its boot. Healthy: the
# pointer drops the trial (the app is kept) and the bridge hears so. Not in time: the error
# is noted and the board restarts, which rolls it back (appslot.choose). An app that blocks
# the board (the event loop never runs again) is caught by a watchdog thread. Loaded only
# on trial.
import asyncio
import time

from pubmote_wire.compat import const

from . import appslot
from .clock import ticks_diff, ticks_ms

_DOG_SLACK_MS = const(2000)  # the thread waits this much longer than the event loop's watch


def start(node, ptr):
    """Watch the app on trial: before it is imported (it may block at import). Returns the
    watch's task (the caller holds it)."""
    healthy = [False]
    trial = ptr["trial"]
    try:
        import _thread

        _thread.start_new_thread(_dog, (int(trial.get("timeout_s", 60) * 1000)
                                        + _DOG_SLACK_MS, healthy))
    except (ImportError, OSError, RuntimeError):
        pass  # no threads here: only the event loop's watch
    return asyncio.create_task(watch(node, ptr, healthy))


def _dog(limit_ms, healthy):
    t0 = ticks_ms()
    while not healthy[0]:
        if ticks_diff(ticks_ms(), t0) >= limit_ms:
            appslot.note_error(appslot.last_error() or "hung: the app blocked the board "
                               "for %ds" % (limit_ms // 1000))
            _hard_reset()
            return
        time.sleep(0.2)


def _hard_reset():
    # from a thread: machine.reset() on a board; the unix port has none, and a thread's
    # sys.exit ends only the thread, so the process is signalled (SIGUSR2: the simulated
    # board's supervisor starts it again, as after a reset)
    try:
        import machine

        machine.reset()
    except (ImportError, AttributeError):
        pass
    import os

    os.system("kill -USR2 $PPID")


async def watch(node, ptr, healthy=None):
    appslot.use(node.config)
    trial = ptr["trial"]
    t0 = ticks_ms()
    timeout_ms = int(trial.get("timeout_s", 60) * 1000)
    grace_ms = int(trial.get("grace_s", 5) * 1000)
    up_since = None
    while True:
        now = ticks_diff(ticks_ms(), t0)
        if node.connected:
            if up_since is None:
                up_since = now
            if now - up_since >= grace_ms or node.counters["acked"] > 0:
                break
        else:
            up_since = None
        if now >= timeout_ms:
            appslot.note_error(appslot.last_error() or (
                "not healthy within %ds (%s)" % (timeout_ms // 1000,
                                                "registered" if node.connected
                                                else "never registered")))
            appslot.reboot()
        await asyncio.sleep(0.2)
    if healthy is not None:
        healthy[0] = True
    appslot.write({"cur": ptr.get("cur", ""), "prev": ptr.get("prev", ""),
                   "report": [trial["v"], "healthy", ""]})
    await send_pending(node)


async def send_pending(node):
    """Send the pointer's report to the bridge (until it has it), then forget it."""
    from . import forget, upreport

    appslot.use(node.config)
    ptr = appslot.read()
    rep = ptr.get("report") if ptr else None
    if rep and await upreport.send(node, rep[0], rep[1], rep[2]):
        ptr.pop("report", None)
        appslot.write(ptr)
    forget("pubmote_node.upreport")

