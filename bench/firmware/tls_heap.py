# TLS link heap benchmark (MicroPython unix port): the board's heap before and after it
# opens its link to the bridge's --tcp face, in clear or with TLS, given as a JSON config
# in the file argv[1] names. Prints "BENCH key value" lines: the MicroPython heap (live bytes after
# gc.collect) and the C heap (mbedTLS's contexts and record buffers; read through
# bench/firmware/malloc_count.c, -1 without it) at each step.
import asyncio
import gc
import json
import os
import sys


def c_heap():
    v = os.getenv("MALLOC_IN_USE")
    return int(v) if v else -1


def snap(step):
    gc.collect()
    print("BENCH %s.gc %d" % (step, gc.mem_alloc()))
    print("BENCH %s.c %d" % (step, c_heap()))


async def main(cfg):
    snap("start")
    from pubmote_node import links

    link = links.from_config(cfg)
    snap("made")
    await link.open()
    snap("open")
    await link.write(memoryview(b"\x00"))  # the link carries a frame delimiter
    snap("used")
    link.close()
    snap("closed")


with open(sys.argv[1]) as f:
    asyncio.run(main(json.load(f)))
