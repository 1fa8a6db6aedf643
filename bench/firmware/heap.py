# Firmware heap benchmark (MicroPython): a Node and the demo's publishing loop against an
# in-process bridge emulator on a loopback link, so it runs where there is no serial port
# (the 32-bit WebAssembly build). Prints "BENCH key value" lines: live heap (after
# gc.collect) at boot and during 1,000 publishes (argv[1]: another count), with the
# emulator's own share subtracted.
import asyncio
import gc
import sys

gc.collect()
M0 = gc.mem_alloc()

from pubmote_wire import cbor, control, data, framing, interest, notify  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1000


class LoopLink:
    """The board's end of an in-memory cable; deliver() is the bridge writing to it."""

    def __init__(self):
        self.inbox = bytearray()
        self.ev = asyncio.Event()
        self.peer = None

    async def open(self):
        pass

    async def readinto(self, buf):
        while not self.inbox:
            self.ev.clear()
            await self.ev.wait()
        n = min(len(buf), len(self.inbox))
        buf[0:n] = self.inbox[0:n]
        self.inbox = self.inbox[n:]  # MicroPython's bytearray has no slice deletion
        return n

    async def write(self, mv):
        self.peer.feed(bytes(mv))

    def close(self):
        pass

    def deliver(self, b):
        self.inbox.extend(b)
        self.ev.set()


class BridgeEmu:
    """Just enough bridge: answers registration, fetches each notified message, acks."""

    def __init__(self, link):
        self.link = link
        self.dec = framing.FrameDecoder(1100)
        self.buf = bytearray(1100)
        self.pending = {}
        self.acked = 0
        self.down = False  # True: the bridge is away, what the board sends is lost

    def feed(self, b):
        if self.down:
            return
        for pkt in self.dec.feed(b):
            self.on(pkt)

    def send(self, pkt):
        self.link.deliver(framing.encode(pkt))

    def on(self, pkt):
        if pkt[0] == 0x05:
            i = interest.decode_interest(pkt)
            nm = bytes(i.name)
            if nm[0 : len(control.REGISTER)] == control.REGISTER:
                self.send(data.encode(nm, cbor.dumps({"gateway": "/pubmote/gw/emu"}),
                                      freshness_ms=0))
                return
            topic, pub, nonce, _, _ = notify.parse_notify_interest(pkt)
            n = notify.encode_msg_interest(self.buf, 0, pub, topic, nonce, interest_nonce=1)
            msg = notify.msg_name(pub, topic, nonce)
            self.pending[bytes(msg)] = nm
            self.send(bytes(self.buf[0:n]))
        elif pkt[0] == 0x06:
            d = data.decode_data(pkt)
            nm = self.pending.pop(bytes(d.name), None)
            if nm is not None:
                n = notify.encode_ack_data(self.buf, 0, nm)
                self.send(bytes(self.buf[0:n]))
                self.acked += 1


def live():
    gc.collect()
    return gc.mem_alloc()


async def bench_main():
    # everything runs in a task: the WebAssembly build cannot cancel or time out the
    # top-level coroutine itself (asyncio.wait_for would throw into it)
    await asyncio.create_task(_bench())


async def _bench():
    m_codec = live()
    link = LoopLink()
    emu = BridgeEmu(link)
    link.peer = emu
    m_emu = live()
    emu_share = m_emu - m_codec
    # firmware code too: the app's, and what the first subscribe() loads
    from pubmote_node import demo, outbox, subscription  # noqa: F401
    from pubmote_node.node import Node

    await asyncio.sleep(1.5)  # the WebAssembly build frees garbage when its JS timers fire
    code = live() - M0 - emu_share  # module code and tables: in flash when frozen
    node = Node({"name": "bench1", "link": "loop", "timeout_ms": 1000}, link=link)
    task = asyncio.create_task(node.run())
    sub = node.subscribe(b"/pubmote/demo/bench1/command")
    while not node.connected:
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.5)
    boot = live() - M0 - emu_share
    print("BENCH heap.code %d" % code)
    print("BENCH heap.after_boot %d" % boot)
    print("BENCH heap.emulator_share %d" % emu_share)
    peak = boot
    for seq in range(N):
        reading = {"seq": seq, "t_ms": seq * 1000, "celsius": 20.0 + (seq % 20) * 0.25}
        ok = await node.publish("/pubmote/demo/bench1/temperature", cbor.dumps(reading))
        if not ok:
            print("BENCH error publish_failed_at %d" % seq)
            break
        if seq % 100 == 0:
            peak = max(peak, live() - M0 - emu_share)
    # the WebAssembly build's timers hold garbage alive until they fire: let them
    await asyncio.sleep(1.5)
    print("BENCH heap.after_messages %d" % (live() - M0 - emu_share))
    print("BENCH heap.peak_live %d" % peak)
    print("BENCH acked %d" % emu.acked)
    # the outbox (publish wait=False, as the demo publishes): the bridge goes away and the
    # readings fill it past its defaults (64 messages, 4,096 bytes); the bridge comes back
    # and it drains; after it, the heap of a board whose outbox is loaded and empty
    emu.down = True
    before = live()
    for seq in range(N, N + 100):
        reading = {"seq": seq, "t_ms": seq * 1000, "celsius": 20.0 + (seq % 20) * 0.25}
        await node.publish("/pubmote/demo/bench1/temperature", cbor.dumps(reading), wait=False)
    # a queueing publish never yields: nothing ran meanwhile, this is the queue's own heap
    print("BENCH heap.outbox_queue %d" % (live() - before))
    await asyncio.sleep(1.5)
    print("BENCH heap.outbox_full %d" % (live() - M0 - emu_share))
    emu.down = False
    print("BENCH outbox.held %d" % node.stats()["outbox"])
    while node.stats()["outbox"]:
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.5)
    print("BENCH heap.after_outbox %d" % (live() - M0 - emu_share))
    print("BENCH outbox.dropped %d" % node.counters["outbox_dropped"])
    sub.close()
    task.cancel()
    await asyncio.sleep(0)


if hasattr(asyncio, "run"):
    asyncio.run(bench_main())
