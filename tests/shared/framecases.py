# Frame cases more than one suite needs (framing, link batches). Runs on CPython and
# MicroPython, like the suites that import it.
from pubmote_wire import framing


def crc_with_zero_byte():
    # short payloads whose CRC has a zero byte: the block after it opens at the very end
    out = []
    for k in range(2000):
        p = b"%d" % k
        c = framing.crc16(p)
        if (c >> 8) == 0 or (c & 0xFF) == 0:
            out.append(p)
        if len(out) == 3:
            break
    return out
