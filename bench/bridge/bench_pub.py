# Board app for the bridge benchmark (MicroPython): publish as fast as the bridge acks,
# with `lanes` publishes in flight, each payload "<seq> <time_ns at publish>".
import asyncio
import time


async def lane(node, topic, state):
    while True:
        seq = state[0]
        state[0] = seq + 1
        ok = await node.publish(topic, b"%d %d" % (seq, time.time_ns()))
        if not ok:
            state[1].append(seq)
        await asyncio.sleep(0)


async def main(node):
    tasks = [asyncio.create_task(node.run())]  # held for the app's life
    while not node.connected:
        await asyncio.sleep(0.05)
    topic = "/bench/%s/data" % node.name
    state = [0, []]
    for _ in range(node.config.get("lanes", 4)):
        tasks.append(asyncio.create_task(lane(node, topic, state)))
    while True:
        await asyncio.sleep(1)
