# Bench app (MicroPython unix port): umqtt.simple, QoS 1, publishing to a broker as fast as
# its PUBACKs come back (umqtt.simple waits for each), for SECONDS; prints one RESULT line.
# argv: host port seconds
import sys
from time import ticks_diff, ticks_ms, ticks_us

from lat import Hist
from umqtt.simple import MQTTClient


def main():
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    c = MQTTClient(b"bench-board", host, port=port)
    c.connect()
    # umqtt.simple writes a publish in four pieces: without TCP_NODELAY, Nagle's algorithm
    # and the broker's delayed ACK hold each one for tens of milliseconds
    c.sock.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY (no constants on the unix port)
    h = Hist()
    seq = 0
    t_start = ticks_ms()
    end = int(seconds * 1000)
    while ticks_diff(ticks_ms(), t_start) < end:
        if c.pid >= 65535:
            c.pid = 0  # umqtt.simple never wraps its 16-bit packet id; 0 is not allowed
        t0 = ticks_us()
        c.publish(b"/bench/mqtt/data", b"%d %d" % (seq, t0), qos=1)
        h.add(t0)
        seq += 1
    h.report("umqtt", seq, 0, ticks_diff(ticks_ms(), t_start) / 1000)
    c.disconnect()


main()
