# A board app for the host tests (MicroPython): subscribes to the prefixes in its config
# ("watch"), keeps the last messages it receives, publishes numbered messages every
# "seq_period_ms", and obeys commands on /test/<board>/ctl: "sub:<prefix>",
# "unsub:<prefix>", "pub:<topic>|<payload>", "report" (stats as CBOR on .../report).
import asyncio

from pubmote_wire import cbor

_KEEP = 32


async def main(node):
    cfg = node.config
    base = "/test/%s/" % node.name
    tasks = [asyncio.create_task(node.run())]  # held for the app's life
    # "ctl|", not "ctl": a byte prefix "ctl" would also match our own "ctl-done" replies
    ctl = node.subscribe(base + "ctl|")
    watch = node.subscribe(*cfg.get("watch", []))
    state = {"sent": 0, "failed": [], "got": []}
    # named data for NDN apps: /test/<board>/data/<x> answers "<board>:<x-uri>"
    node.serve(base + "data", lambda uri: node.name.encode() + b":" + uri)
    tasks.append(asyncio.create_task(_watcher(node, watch, base, state, cfg.get("echo", False))))
    if cfg.get("seq_period_ms"):
        tasks.append(asyncio.create_task(_seq(node, base, cfg["seq_period_ms"], state)))
    while True:
        msg = await ctl.recv()
        p = msg.payload
        if p.startswith(b"sub:"):
            watch.subscribe(p[4:])
        elif p.startswith(b"unsub:"):
            watch.unsubscribe(p[6:])
        elif p.startswith(b"pub:"):
            topic, _, payload = p[4:].partition(b"|")
            await node.publish(topic.decode(), payload)
        elif p == b"report":
            s = node.stats()
            s["sent"] = state["sent"]
            s["failed"] = state["failed"]
            s["got"] = state["got"]
            s["filters"] = node.filters()
            await node.publish(base + "report", cbor.dumps(s))
        await node.publish(base + "ctl-done", p)


async def _watcher(node, watch, base, state, echo):
    got = state["got"]
    while True:
        msg = await watch.recv()
        line = msg.topic + b"|" + msg.payload
        got.append(line)
        if len(got) > _KEEP:
            got.pop(0)
        if echo:
            await node.publish(base + "got", line)


def _boot_count(path):
    # numbered boots give each boot its own seq range, so resets never reuse a seq
    n = 0
    try:
        with open(path) as f:
            n = int(f.read() or "0") + 1
    except (OSError, ValueError):
        pass
    with open(path, "w") as f:
        f.write("%d" % n)
    return n


async def _seq(node, base, period_ms, state):
    cfg = node.config
    log = cfg.get("acked_log")  # a file on the board: every acked seq, survives resets
    seq = _boot_count(log + ".boot") * 1000000 if log else 0
    pad = b"." * cfg.get("pad", 0)
    while True:
        ok = await node.publish(base + "seq", b"%d" % seq + (b"|" + pad if pad else b""))
        state["sent"] = seq + 1
        if not ok:
            state["failed"].append(seq)
            if len(state["failed"]) > 64:
                state["failed"].pop(0)
        elif log:
            with open(log, "a") as f:
                f.write("%d\n" % seq)
        seq += 1
        await asyncio.sleep(period_ms / 1000)
