# Where a board's time goes per published message (MicroPython): each codec and framing
# step of the exchange a board runs by default (notify with the message inline, ack),
# timed with ticks_us over N repetitions.
# Printed as "STEP <name> <us>" lines for bench/board_link/run.py.
import gc
from time import ticks_diff, ticks_us

from pubmote_wire import data, framing, interest, name, notify

N = 2000
PREFIX = name.from_uri("/pubmote/node/sim1")
TOPIC = name.from_uri("/bench/sim1/data")
PAYLOAD = b"12345 1234567890123"
NONCE = b"\x01\x02\x03\x04"
_tx = bytearray(1100)
_fr = bytearray(1200)


def step(label, f):
    gc.collect()  # a collection inside one step would be charged to it
    t0 = ticks_us()
    for _ in range(N):
        f()
    print("STEP %s %.1f" % (label, ticks_diff(ticks_us(), t0) / N))


def main():
    n = notify.encode_msg_data(_tx, 0, PREFIX, TOPIC, NONCE, PAYLOAD)
    msg = bytes(_tx[:n])
    n = notify.encode_notify_interest(_tx, 0, TOPIC, PREFIX, NONCE, lifetime_ms=1000,
                                      inline=msg)
    note = bytes(_tx[:n])
    n = notify.encode_ack_data(_tx, 0, interest.decode_interest(note).name)
    ack = bytes(_tx[:n])
    print("SIZE notify %d (message inline: %d) ack %d" % (len(note), len(msg), len(ack)))
    dec = framing.FrameDecoder()
    f_ack = framing.encode(ack)
    step("encode_data", lambda: notify.encode_msg_data(_tx, 0, PREFIX, TOPIC, NONCE, PAYLOAD))
    step("encode_notify", lambda: notify.encode_notify_interest(_tx, 0, TOPIC, PREFIX, NONCE,
                                                                 lifetime_ms=1000, inline=msg))
    step("frame_notify", lambda: framing.encode_frame(_fr, 0, note))
    step("deframe_ack", lambda: dec.feed_cb(f_ack, _drop))
    step("decode_ack", lambda: data.decode_data(ack))


def _drop(mv):
    pass


main()
