# A board app for the gateway-mesh tests (MicroPython). Config: "tag" (the gateway's name,
# so boards named alike on different gateways publish apart), "watch" (filters).
# It reports on /test/<tag>/<name>/got every message its filters let in, and on
# /test/<tag>/<name>/dgot every directed message as "<address>|<originator>|<topic>|<body>";
# commands on /test/<tag>/<name>/ctl: "pub:<topic>|<payload>", "send:<address>|<topic>|<body>".
# With "tick_ms" it also publishes /test/<tag>/<name>/tick|<n> (n = 0, 1, ...) that often.
import asyncio

_ACK = b"ok"


async def main(node):
    cfg = node.config
    base = "/test/%s/%s/" % (cfg.get("tag", "x"), node.name)
    tasks = [asyncio.create_task(node.run())]  # held for the app's life
    ctl = node.subscribe(base + "ctl|")
    watch = node.subscribe(*cfg.get("watch", []))
    tasks.append(asyncio.create_task(_watcher(node, watch, base)))
    tasks.append(asyncio.create_task(_directed(node, base)))
    if cfg.get("tick_ms"):
        tasks.append(asyncio.create_task(_tick(node, base, cfg["tick_ms"])))
    while True:
        msg = await ctl.recv()
        p = msg.payload
        if p.startswith(b"pub:"):
            topic, _, payload = p[4:].partition(b"|")
            await node.publish(topic.decode(), payload)
        elif p.startswith(b"send:"):
            address, _, rest = p[5:].partition(b"|")
            topic, _, body = rest.partition(b"|")
            await node.send(address.decode(), topic.decode(), body)
        await node.publish(base + "ctl-done", p)


async def _watcher(node, watch, base):
    while True:
        msg = await watch.recv()
        await node.publish(base + "got", msg.topic + b"|" + msg.payload)


async def _directed(node, base):
    inbox = node.directed()
    while True:
        m = await inbox.recv()
        line = "%s|%s|%s|" % (m.address, m.originator, m.topic)
        await node.publish(base + "dgot", line.encode() + m.payload)


async def _tick(node, base, period_ms):
    n = 0
    while True:
        await node.publish(base + "tick", b"%d" % n)
        n += 1  # each number once, acked or not: a repeat seen downstream is a duplicate
        await asyncio.sleep(period_ms / 1000)
