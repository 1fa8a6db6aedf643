# The demo app every board runs: a CBOR temperature reading each second, and an echo of
# every command it receives, published on .../ack. Readings go through the board's outbox
# (publish with wait=False): the app keeps its period while the bridge is away, and the
# readings taken meanwhile follow, in order, once it is back, each with the time it was
# taken by the board's clock (taken_ms, null before the board first registered; the
# message's own taken-time says the same to the bridge: docs/protocols/event-time.md).
import asyncio

from pubmote_wire import cbor

try:
    from time import ticks_ms
except ImportError:  # CPython
    import time

    def ticks_ms():
        return int(time.monotonic() * 1000)


def read_temperature(seq):
    """The board's sensor: the RP2040/ESP32 internal sensor where there is one, else a
    deterministic waveform so simulated boards publish plausible values."""
    try:
        from machine import ADC

        adc = ADC(4)  # RP2040 internal temperature sensor
        volts = adc.read_u16() * 3.3 / 65535
        return 27 - (volts - 0.706) / 0.001721
    except (ImportError, ValueError, OSError, TypeError, AttributeError):
        return 20.0 + (seq % 20) * 0.25


async def publisher(node, period_ms=1000):
    base = "/pubmote/demo/%s/" % node.name
    seq = 0
    while True:
        # the reading made in the call: no local keeps it (its dict, float and long int)
        # on the heap while the task sleeps
        await node.publish(base + "temperature",
                           cbor.dumps({"seq": seq, "t_ms": ticks_ms(), "taken_ms": node.time_ms(),
                                       "celsius": read_temperature(seq)}), wait=False)
        seq += 1
        await asyncio.sleep(period_ms / 1000)


async def commander(node):
    # every command is echoed on .../ack; the command "stats" also publishes the board's
    # own health report (counters, gc.mem_free) as CBOR on .../stats. A directed message to
    # this board, e.g. /gw1/sim1 or /*/*, is a command too: it comes into the same queue
    # (one queue and one task for both: the board's heap)
    base = "/pubmote/demo/%s/" % node.name
    sub = node.subscribe(base + "command|")
    node.directed(sub)
    while True:
        # the message is its callee's: no local of this loop keeps it on the heap while
        # the task waits for the next
        await _answer(node, base, (await sub.recv()).payload)


async def _answer(node, base, payload):
    try:
        await _command(node, base, payload)
    except Exception as e:  # noqa: BLE001
        # one reply that failed (its link gone mid-publish) must not end the task that
        # answers every later command: counted, and said on the console
        node.counters["app_errors"] = node.counters.get("app_errors", 0) + 1
        print("demo: command", payload, "failed:", repr(e))


async def _command(node, base, payload):
    if payload == b"stats":
        import gc

        gc.collect()  # so mem_free tells live data, not garbage not yet collected
        await node.publish(base + "stats", cbor.dumps(node.stats()))
    await node.publish(base + "ack", payload)


async def main(node, period_ms=1000):
    asyncio.create_task(node.run())
    asyncio.create_task(commander(node))
    await publisher(node, period_ms)
