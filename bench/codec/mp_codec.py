# Codec benchmark for MicroPython (unix port and the 32-bit WebAssembly build): ops/s and
# bytes allocated per operation (gc.mem_alloc deltas with gc disabled) for encode into a
# reused buffer and for parse into a reused object. Prints "BENCH key value" lines.
import gc
import sys
import time

from pubmote_wire import data, name, notify
from pubmote_wire.data import Data
from pubmote_wire.interest import Interest
from pubmote_wire.signature import DigestSigner

try:
    ticks_us = time.ticks_us
    ticks_diff = time.ticks_diff
except AttributeError:  # the WebAssembly build has time.time_ns only in some variants
    def ticks_us():
        return time.time_ns() // 1000

    def ticks_diff(a, b):
        return a - b

N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2000
SIGNER = DigestSigner()
TOPIC = name.from_uri("/scout/topic")
PUB = name.from_uri("/scout/pub")
NONCE = b"\xca\xfe\xba\xbe"
DNAME = name.from_uri("/pubmote/demo/sim1/temperature")
CONTENT = bytes(range(100))
BUF = bytearray(512)
_ALLOC_RUNS = 20


def enc_notify():
    return notify.encode_notify_interest(BUF, 0, TOPIC, PUB, NONCE, interest_nonce=0x01020304,
                                         lifetime_ms=4000, signer=SIGNER)


def enc_data():
    return data.encode_data(BUF, 0, DNAME, CONTENT, content_type=0, signer=SIGNER)


def measure(label, fn, n):
    fn()
    # allocation: a short run with the collector off, so every byte allocated is counted
    gc.collect()
    gc.disable()
    a0 = gc.mem_alloc()
    for _ in range(_ALLOC_RUNS):
        fn()
    a1 = gc.mem_alloc()
    gc.enable()
    gc.collect()
    # speed: a longer run with the collector on, as an application runs
    t0 = ticks_us()
    for _ in range(n):
        fn()
    dt = ticks_diff(ticks_us(), t0)
    print("BENCH %s.ops_per_s %d" % (label, n * 1000000 // max(dt, 1)))
    print("BENCH %s.bytes_per_op %d" % (label, (a1 - a0) // _ALLOC_RUNS))


def main():
    bits = 64 if sys.maxsize > 0x7FFFFFFF else 32
    print("BENCH runtime micropython-%dbit" % bits)
    n = N
    measure("notify_interest.encode", enc_notify, n)
    m = enc_notify()
    pkt = bytes(BUF[0:m])
    ibox = Interest()
    measure("notify_interest.parse", lambda: notify.parse_notify_interest(pkt, ibox), n)
    measure("data.encode", enc_data, n)
    m = enc_data()
    dpkt = bytes(BUF[0:m])
    dbox = Data()
    measure("data.parse", lambda: data.decode_data(dpkt, dbox), n)
    gc.collect()
    print("BENCH heap.mem_alloc_after_imports %d" % gc.mem_alloc())


main()
