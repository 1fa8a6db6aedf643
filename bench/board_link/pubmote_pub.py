# Bench app (MicroPython, run as a simulated board's app): `lanes` publishers, each awaiting
# its ack before the next publish, for `seconds` once the bridge is up; prints one RESULT.
# With `rate` (msg/s, all lanes together) the publishes are paced to that schedule.
import asyncio
from time import ticks_diff, ticks_ms, ticks_us

from lat import Hist


async def lane(node, topic, state, h, end_ms, rate, start_us):
    while ticks_diff(end_ms, ticks_ms()) > 0:
        seq = state[0]
        state[0] = seq + 1
        if rate:
            # the seq-th message is due seq/rate seconds after the start; none is skipped
            due = seq * 1000000 // rate
            ahead = due - ticks_diff(ticks_us(), start_us)
            if ahead > 1000:
                await asyncio.sleep_ms(ahead // 1000)
        t0 = ticks_us()
        if await node.publish(topic, b"%d %d" % (seq, t0)):
            h.add(t0)
            state[1] += 1
        else:
            state[2] += 1


async def main(node):
    cfg = node.config
    h = Hist()  # first: its one block is found before the traffic fragments the heap
    runner = asyncio.create_task(node.run())
    while not node.connected:
        await asyncio.sleep(0.05)
    await asyncio.sleep(cfg.get("warmup_s", 1))
    lanes = cfg.get("lanes", 1)
    state = [0, 0, 0]
    t_start = ticks_ms()
    end_ms = t_start + int(cfg.get("seconds", 5) * 1000)
    topic = "/bench/%s/data" % node.name
    rate = int(cfg.get("rate", 0))
    start_us = ticks_us()
    await asyncio.gather(*[lane(node, topic, state, h, end_ms, rate, start_us)
                           for _ in range(lanes)])
    h.report("pubmote-%d" % lanes, state[1], state[2], ticks_diff(ticks_ms(), t_start) / 1000)
    await runner  # the node keeps its link until the bench stops the board
