# The emulated Pico's side of bench/firmware/pico.py (runs on the board, from its /lib):
# live heap after Node() and while publishing and receiving, and acked publishes over the
# 115200-baud UART, timed on the board's own clock. Prints "BENCH key value" on USB.
# With the config's bench_demo: the demo app instead, its live heap printed twice a second.
import asyncio
import gc
import time

N = 1000  # messages each way; the config's bench_n (pico.py --quick) sets another
PAYLOAD = b"0123456789abcdef"  # a small reading


def live():
    gc.collect()
    return gc.mem_alloc()


def in_flight(node):
    # an Interest awaiting its Data (a fetch, a keepalive registration) or a publish
    # awaiting its ack (an NDN notify's or a link batch record's)
    c = node.counters
    return (node.exchange.pending
            or c["published"] - c["acked"] - c["publish_failed"] > 0)


async def settled(node):
    # live heap once the board is quiet (the last message acked, no keepalive or bridge
    # retry in flight): two readings 200 ms apart that agree, with nothing in flight at
    # either (on a loaded machine a round trip can outlast 200 ms). What the node keeps,
    # not what it holds while handling a message (the "handling" rows)
    last = live()
    for _ in range(40):
        await asyncio.sleep_ms(200)
        now = live()
        if now == last and not in_flight(node):
            break
        last = now
    return last


def main(node):
    # the coroutine the board's boot awaits: the demo app's own, as on a board that runs
    # it (no frame of this module's held under it), or the bench's
    if node.config.get("bench_demo"):
        return demo(node)
    return bench(node)


async def bench(node):
    n = node.config.get("bench_n", N)
    print("BENCH heap.after_node %d" % live())
    runner = asyncio.create_task(node.run())
    base = "/pubmote/bench/%s/" % node.name
    sub = node.subscribe(base + "in|")
    while not node.connected:
        await asyncio.sleep_ms(10)
    await asyncio.sleep_ms(500)
    print("BENCH heap.connected %d" % live())
    rtt_us = 0
    rtt_max_us = 0
    acked = 0
    t0 = time.ticks_ms()
    for i in range(n):
        t = time.ticks_us()
        if await node.publish(base + "out", PAYLOAD):
            acked += 1
        d = time.ticks_diff(time.ticks_us(), t)
        rtt_us += d
        if d > rtt_max_us:
            rtt_max_us = d
        if i == n // 2 - 1:
            print("BENCH heap.pub_half %d" % live())
    print("BENCH pub.ms %d" % time.ticks_diff(time.ticks_ms(), t0))
    print("BENCH pub.acked %d" % acked)
    print("BENCH pub.rtt_us_avg %d" % (rtt_us // n))
    print("BENCH pub.rtt_us_max %d" % rtt_max_us)
    print("BENCH heap.after_pub %d" % live())
    print("BENCH heap.after_pub_settled %d" % await settled(node))
    # the host sends N messages, at most 10 beyond what the board last reported having
    got = 0
    await node.publish(base + "ready", b"0")
    while got < n:
        await sub.recv()
        got += 1
        if got % 10 == 0:
            if got == n // 2:
                print("BENCH heap.recv_half_busy %d" % live())
                print("BENCH heap.recv_half %d" % await settled(node))
            if got < n:
                await node.publish(base + "ready", b"%d" % got)
    # measured as at the half: before the host hears of the last ten, so that it sends no
    # more. Announced first, the next window's messages came in while settling and waited
    # in the queue the app no longer reads (up to 10 Messages, ~1.2 kB: not growth)
    print("BENCH heap.after_recv_busy %d" % live())
    print("BENCH heap.after_recv %d" % await settled(node))
    print("BENCH recv.queued %d" % sub.pending())
    print("BENCH recv.pending %d" % len(node.exchange.pending))
    await asyncio.sleep(5)  # past a keepalive: what stays, not what a round trip holds
    print("BENCH heap.after_recv_late %d" % await settled(node))
    s = node.stats()
    # the node's packet buffers start small and grow at the first bigger packet: whether
    # this run's packets made them grow (the heap rows above hold the decoder's; the
    # scratch is made per packet)
    print("BENCH buf.tx %d" % node.exchange.tx_size)
    print("BENCH buf.rx_frame %d" % len(node.port.decoder.buf))
    print("BENCH recv.count %d" % got)
    print("BENCH node.sub_dropped %d" % s["sub_dropped"])
    print("BENCH node.nacks %d" % s["nacks"])
    print("BENCH done 1")
    await runner  # the node keeps its link until the bench stops the board


def demo(node):
    # the demo app as a board runs it (pubmote_node.demo: its coroutine, returned), and
    # beside it a task that prints the live heap, what the demo received and what it
    # published, every 500 ms (not a multiple of the demo's period: the readings are caught
    # at every phase of their round trip). The task and this module's globals are all the
    # bench adds to the demo's heap (the demo runs until the bench stops the board)
    from pubmote_node import demo as app

    asyncio.create_task(_watch(node))  # noqa: RUF006 - MicroPython's scheduler holds it
    return app.main(node, node.config.get("period_ms", 1000))


async def _watch(node):
    c = node.counters
    while True:
        await asyncio.sleep_ms(500)
        print("DEMO %d %d %d" % (live(), c["received"], c["acked"]))
