# A board app for the sleep tests and bench (MicroPython): subscribed to
# /sleepy/<board>/cmd before its link comes up, it says /sleepy/<board>/awake when
# registered, publishes each command it receives on /sleepy/<board>/got as
# "<command> <ms since registered>", stays awake "awake_ms" after registering, then
# deep-sleeps "sleep_ms" (node.sleep): on the unix port the process ends and the
# simulated board's supervisor starts it again, so nothing is kept but on the bridge.
import asyncio
import time


async def main(node):
    cfg = node.config
    base = "/sleepy/%s/" % node.name
    cmds = node.subscribe(base + "cmd|")
    runner = asyncio.create_task(node.run())  # held for the app's life
    while not node.connected and not runner.done():
        await asyncio.sleep(0.01)
    t0 = time.ticks_ms()
    await node.publish(base + "awake", b"%d" % cfg.get("sleep_ms", 1000))
    awake_ms = cfg.get("awake_ms", 300)
    while True:
        while True:
            left = awake_ms - time.ticks_diff(time.ticks_ms(), t0)
            if left <= 0 and not cmds.pending():
                break
            try:
                msg = await asyncio.wait_for_ms(cmds.recv(), max(left, 1))
            except asyncio.TimeoutError:
                continue
            await node.publish(base + "got", msg.payload + b" %d" % time.ticks_diff(
                time.ticks_ms(), t0))
        if await node.sleep(cfg.get("sleep_ms", 1000)) is False:
            t0 = time.ticks_ms() - awake_ms  # called off: take what came, then sleep again
