# Codec benchmark for MicroPython (unix port and the 32-bit WebAssembly build): ops/s and
# bytes allocated per operation (gc.mem_alloc deltas with gc disabled) for encode into a
# reused buffer and for parse into a reused object. Prints "BENCH key value" lines.
# hashlib's cost is a floor the codec cannot go under: each hash is one sha256 object plus
# its digest() bytes (printed as hashlib.sha256_hash); a signed notify Interest needs two
# (ParametersSha256Digest and the DigestSha256 signature), a Data one. The unsigned
# notify, the msg Interest and the ack Data lines show what the codec itself allocates.
import gc
import sys
import time

from pubmote_wire import data, interest, name, notify
from pubmote_wire.compat import sha256
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
MV = memoryview(BUF)
_ALLOC_RUNS = 20


def enc_notify():
    return notify.encode_notify_interest(BUF, 0, TOPIC, PUB, NONCE, interest_nonce=0x01020304,
                                         lifetime_ms=4000, signer=SIGNER)


def enc_data():
    return data.encode_data(BUF, 0, DNAME, CONTENT, content_type=0, signer=SIGNER)


def enc_notify_unsigned():
    return notify.encode_notify_interest(BUF, 0, TOPIC, PUB, NONCE, interest_nonce=0x01020304,
                                         lifetime_ms=4000, signer=None)


def enc_msg():
    return notify.encode_msg_interest(BUF, 0, PUB, TOPIC, NONCE, interest_nonce=0x01020304,
                                      lifetime_ms=4000)


def one_hash():
    return sha256(MV[0:100]).digest()  # with the region view every codec hash needs


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
    # what the codec allocates apart from hashlib, and hashlib's own floor
    measure("hashlib.sha256_hash", one_hash, n)
    measure("notify_interest.encode_unsigned", enc_notify_unsigned, n)
    m = enc_notify_unsigned()
    upkt = bytes(BUF[0:m])
    measure("notify_interest.parse_unsigned", lambda: notify.parse_notify_interest(upkt, ibox), n)
    measure("msg_interest.encode", enc_msg, n)
    m = enc_msg()
    mpkt = bytes(BUF[0:m])
    measure("msg_interest.parse", lambda: interest.decode_interest(mpkt, ibox), n)
    full = bytes(interest.decode_interest(pkt).name)
    measure("ack_data.encode", lambda: notify.encode_ack_data(BUF, 0, full, signer=SIGNER), n)
    gc.collect()
    print("BENCH heap.mem_alloc_after_imports %d" % gc.mem_alloc())


main()
