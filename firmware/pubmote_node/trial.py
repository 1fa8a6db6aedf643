# An app on trial after an update: healthy once it has registered and stayed registered for
# grace_s seconds, or has had a publish acked, within timeout_s of its boot. Healthy: the
# pointer drops the trial (the app is kept) and the bridge hears so. Not in time: the error
# is noted and the board restarts, which rolls it back (appslot.choose). Loaded only on trial.
import asyncio
import time

from . import appslot


async def watch(node, ptr):
    appslot.use(node.config)
    trial = ptr["trial"]
    t0 = _ms()
    timeout_ms = int(trial.get("timeout_s", 60) * 1000)
    grace_ms = int(trial.get("grace_s", 5) * 1000)
    up_since = None
    while True:
        now = _since(t0)
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


def _ms():
    try:
        return time.ticks_ms()
    except AttributeError:  # CPython
        return int(time.monotonic() * 1000)


def _since(t0):
    try:
        return time.ticks_diff(time.ticks_ms(), t0)
    except AttributeError:
        return int(time.monotonic() * 1000) - t0
