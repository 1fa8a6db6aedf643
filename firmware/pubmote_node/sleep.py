# The board's deep sleep (node.sleep): let what the board sends finish, tell the bridge
# how long it sleeps (a registration with "sleep": the bridge keeps its session and holds
# what is published for it: docs/protocols/sleep.md), let the fetches of messages already
# announced finish, then sleep as deep as the port allows. Loaded at the first sleep only.
import asyncio

from pubmote_wire.compat import const

from .clock import ticks_diff, ticks_ms

_QUIET_MS = const(3000)  # at most this long for the board's own sends before it sleeps
_ANNOUNCE_TRIES = const(3)


async def sleep(node, ms):
    """Deep-sleep ms milliseconds; the board starts again from main.py (nothing of its RAM
    is kept). The bridge is told first; unanswered (no bridge), the board sleeps all the
    same and the bridge sees it as gone. Returns False, the sleep called off and the bridge
    told the board is awake, when messages the app has not taken wait in its
    subscriptions (some arrived while it got ready): they would be lost in the sleep."""
    await _quiet(node, True)
    if node.unread():
        return False
    session = node.session
    session.sleeping = ms
    for _ in range(_ANNOUNCE_TRIES):
        if session.connected and await session.register(ms):
            break
    await _quiet(node, False)
    if node.unread():
        session.sleeping = None
        await session.register(None)
        return False
    deep_sleep(node, ms)


async def _quiet(node, sends):
    # sends: the publishes waiting (soft state, outbox) too; else only the Interests out
    # (a fetch of a message the bridge announced just before it heard of the sleep), and
    # then a few turns for their acks to be written
    t0 = ticks_ms()
    while ticks_diff(ticks_ms(), t0) < _QUIET_MS:
        if not node.exchange.pending and not (sends and node.sending()):
            break
        await asyncio.sleep(0.02)
    for _ in range(3):
        await asyncio.sleep(0.01)


def deep_sleep(node, ms):
    """machine.deepsleep(ms) on a board (it wakes through main.py). The unix port has none:
    the link is closed, the process waits ms and ends with status 75, and the simulated
    board's supervisor starts it again, as a board waking with nothing in RAM."""
    try:
        import machine

        machine.deepsleep(ms)
    except (ImportError, AttributeError):
        pass
    import sys
    import time

    node.port.close()
    time.sleep_ms(ms) if hasattr(time, "sleep_ms") else time.sleep(ms / 1000)
    sys.exit(75)
