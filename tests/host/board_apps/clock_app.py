# A board app for the event-time tests (MicroPython unix port): every "period_ms" it
# publishes on /test/<board>/clock, through the outbox (wait=False) unless "wait" is set,
# the CBOR map {"seq", "t_ms", "unc"}: t_ms is the port's ticks_ms() at the publish, the
# monotonic clock the test reads too, so the test knows when each message was taken; unc
# how far the board's clock says it may be off then (None before its first sync).
import asyncio
import time

from pubmote_wire import cbor


async def main(node):
    cfg = node.config
    topic = "/test/%s/clock" % node.name
    period_ms = cfg.get("period_ms", 100)
    wait = cfg.get("wait", False)
    runner = asyncio.create_task(node.run())
    seq = 0
    while not runner.done():
        payload = cbor.dumps({"seq": seq, "t_ms": time.ticks_ms(),
                              "unc": node.time_uncertainty_ms()})
        await node.publish(topic, payload, wait=wait)
        seq += 1
        await asyncio.sleep(period_ms / 1000)
