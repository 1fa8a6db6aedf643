# The durable outbox's heap (MicroPython: the unix port, or the emulated Pico where
# tests/host/boards/test_emu_outlog.py's way of booting runs it from its filesystem). Prints
# "BENCH key value" lines: live heap (gc.mem_alloc after gc.collect) that a Node holds with
# the outbox in RAM (as loaded by the first publish(wait=False)) and with the durable
# outbox (config "outbox_dir": outbox.py and outlog.py loaded at Node()), each empty and
# holding 64 demo readings (on the durable one, replayed from the log at boot). argv[1] (or
# the global DIR when exec'd): the directory the log goes in.
import gc
import os
import sys

from pubmote_wire import cbor

DIR = globals().get("DIR") or (sys.argv[1] if len(sys.argv) > 1 else "/outbox_bench")
TOPIC = "/pubmote/demo/bench1/temperature"


def live():
    gc.collect()
    return gc.mem_alloc()


def clear(d):
    try:
        for n in os.listdir(d):
            os.remove(d + "/" + n)
        os.rmdir(d)
    except OSError:
        pass


def reading(seq):
    return cbor.dumps({"seq": seq, "t_ms": seq * 200, "celsius": 20.0 + (seq % 20) * 0.25})


def cfg(durable):
    c = {"name": "bench1", "link": "uart", "uart": 0, "tx": 0, "rx": 1}
    if durable:
        c["outbox_dir"] = DIR
    return c


def main():
    from pubmote_node.node import Node
    from pubmote_node.outbox import Outbox

    clear(DIR)
    base = live()
    node = Node(cfg(False))
    plain = live() - base
    # what the first wait=False publish makes, and the 64 held as an outage holds them
    # (queued without a drain task: the bench reaches inside, SLF001)
    ob = Outbox(node, None)
    ram_empty = live() - base
    for i in range(64):
        ob._hold(TOPIC, reading(i), i * 1000)  # noqa: SLF001 - stamps as ticks_ms
    ram_full = live() - base
    node = ob = None
    gc.collect()
    base = live()
    node = Node(cfg(True))
    durable_empty = live() - base
    from pubmote_node.outlog import OutLog

    log = OutLog(DIR)
    log.replay()
    for i in range(64):
        log.append((TOPIC.encode(), reading(i)))
    log = None
    node = None
    gc.collect()
    base = live()
    node = Node(cfg(True))  # the reboot: the 64 come back from the log
    durable_full = live() - base
    print("BENCH outbox_heap.node %d" % plain)
    print("BENCH outbox_heap.ram_empty %d" % ram_empty)
    print("BENCH outbox_heap.ram_64 %d" % ram_full)
    print("BENCH outbox_heap.durable_empty %d" % durable_empty)
    print("BENCH outbox_heap.durable_64 %d" % durable_full)
    print("BENCH outbox_heap.replayed %d" % node.stats()["outbox"])
    clear(DIR)


main()
