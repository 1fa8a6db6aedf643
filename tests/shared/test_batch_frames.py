# Tests of pubmote_wire.batch (link batches, docs/protocols/link-batch.md): exact frame bytes,
# the same-topic shorthand, bounds, and malformed frames rejected whole.
from framecases import crc_with_zero_byte
from pubmote_wire import batch, framing
from pubmote_wire.errors import DecodeError, EncodeError
from runner import hexs, raises, unhex

TOPIC = unhex("080174")  # /t
TOPIC2 = unhex("080161 080162")  # /a/b
EPOCH = 0x01020304
BATCH_HEX = ("c0 01020304"
             " 00000005 03 080174 0004 32312e35"
             " 00000006 00 0004 32322e30"
             " 00000009 06 080161080162 0000")
ACKS_HEX = "c1 01020304 00000005 0002 00000009 0001"


def _batch():
    buf = bytearray(64)
    off = batch.begin(buf, batch.BATCH, EPOCH)
    off = batch.add_record(buf, off, 5, TOPIC, b"21.5")
    off = batch.add_record(buf, off, 6, TOPIC, b"22.0", True)
    off = batch.add_record(buf, off, 9, TOPIC2, b"")
    return bytes(buf[:off])


def test_batch_bytes():
    assert hexs(_batch()) == BATCH_HEX.replace(" ", "")


def test_record_size_matches():
    assert batch.record_size(TOPIC, b"21.5") == 14
    assert batch.record_size(TOPIC, b"22.0", True) == 11
    assert len(_batch()) == batch.HEADER + 14 + 11 + 13


def test_decode_batch():
    epoch, recs = batch.decode_batch(_batch())
    assert epoch == EPOCH
    assert [(s, bytes(t), bytes(p), k) for s, t, p, k in recs] == [
        (5, TOPIC, b"21.5", None), (6, TOPIC, b"22.0", None), (9, TOPIC2, b"", None)]


# A timed BATCH (docs/protocols/event-time.md): the board's clock 1700000000000 ms at
# ticks 0x3fffffff (the last before its 2**30 wrap); seq 5 published 5000 ms before it, seq
# 6 1 ms before (its ticks given unmasked: written modulo 2**30)
TIMED_HEX = ("c2 01020304 0000018bcfe56800 3fffffff"
             " 00000005 3fffec77 03 080174 0004 32312e35"
             " 00000006 3ffffffe 00 0004 32322e30")


def _timed(clock):
    buf = bytearray(64)
    off = batch.begin(buf, batch.BATCH_T, EPOCH)
    assert off == batch.HEADER_T == 17
    off = batch.add_record(buf, off, 5, TOPIC, b"21.5", False, 0x3FFFEC77)
    off = batch.add_record(buf, off, 6, TOPIC, b"22.0", True, 0x7FFFFFFE)  # masked
    batch.set_clock(buf, clock, 0x3FFFFFFF)
    return bytes(buf[:off])


def test_timed_batch_bytes_and_taken_times():
    clock = unhex("0000018bcfe56800")  # 1700000000000
    pkt = _timed(clock)
    assert hexs(pkt) == TIMED_HEX.replace(" ", "")
    assert batch.record_size(TOPIC, b"21.5", False, True) == 18
    assert len(pkt) == batch.HEADER_T + 18 + 15
    epoch, recs = batch.decode_batch(pkt)
    assert epoch == EPOCH
    assert [(s, bytes(t), bytes(p)) for s, t, p, _ in recs] == [
        (5, TOPIC, b"21.5"), (6, TOPIC, b"22.0")]
    base = 1700000000000
    assert recs[0][3] == base - 5000 and recs[1][3] == base - 1


def test_timed_batch_across_the_ticks_wrap():
    # header ticks after the wrap, a record stamped before it
    buf = bytearray(64)
    off = batch.begin(buf, batch.BATCH_T, EPOCH)
    off = batch.add_record(buf, off, 1, TOPIC, b"x", False, 0x3FFFFF00)
    batch.set_clock(buf, unhex("0000018bcfe56800"), 0x100)
    recs = batch.decode_batch(bytes(buf[:off]))[1]
    assert recs[0][3] == 1700000000000 - 0x200


def test_timed_batch_without_a_clock():
    # clock 0: the board has no synced clock, and says so: no taken-times at all
    pkt = _timed(None)
    assert pkt[batch.HEADER : batch.HEADER + 8] == bytes(8)
    assert [r[3] for r in batch.decode_batch(pkt)[1]] == [None, None]


def test_timed_batch_malformed():
    good = _timed(unhex("0000018bcfe56800"))
    for n in range(1, len(good)):
        if n != batch.HEADER_T + 18:  # the frame cut after its first record is whole
            assert raises(DecodeError, batch.decode_batch, good[:n]), n
    # ticks at or above 2**30, in the header or a record
    bad = bytearray(good)
    bad[13] = 0x40
    assert raises(DecodeError, batch.decode_batch, bytes(bad))
    bad = bytearray(good)
    bad[batch.HEADER_T + 4] = 0x80
    assert raises(DecodeError, batch.decode_batch, bytes(bad))


def test_acks_bytes_and_decode():
    buf = bytearray(32)
    off = batch.begin(buf, batch.ACKS, EPOCH)
    off = batch.add_acks(buf, off, [5, 6, 9])
    pkt = bytes(buf[:off])
    assert hexs(pkt) == ACKS_HEX.replace(" ", "")
    assert batch.ack_runs(pkt) == 2
    assert batch.epoch_of(pkt) == EPOCH
    assert [batch.ack_run(pkt, i) for i in range(2)] == [(5, 2), (9, 1)]
    assert batch.ack_runs(unhex("c1 01020304")) == 0


def test_ack_runs():
    buf = bytearray(64)
    top = batch.SEQ_MASK
    # a run never crosses the wrap of seq, nor goes back
    off = batch.add_acks(buf, batch.begin(buf, batch.ACKS, 1), [top - 1, top, 0, 1, 7, 3])
    pkt = bytes(buf[:off])
    assert [batch.ack_run(pkt, i) for i in range(batch.ack_runs(pkt))] == [
        (top - 1, 2), (0, 2), (7, 1), (3, 1)]
    assert raises(EncodeError, batch.add_acks, bytearray(10), 5, [1])
    assert raises(EncodeError, batch.add_acks, buf, 5, [top + 1])

def test_framed_round_trip():
    # a batch is an ordinary link frame: COBS + CRC-16 around it
    dec = framing.FrameDecoder()
    assert dec.feed(framing.encode(_batch())) == [_batch()]


def test_seq_and_epoch_bounds():
    buf = bytearray(64)
    top = batch.SEQ_MASK
    assert top == (1 << 30) - 1
    off = batch.begin(buf, batch.BATCH, top)
    off = batch.add_record(buf, off, top, TOPIC, b"x")
    epoch, recs = batch.decode_batch(bytes(buf[:off]))
    assert epoch == top and recs[0][0] == top
    assert raises(EncodeError, batch.begin, buf, batch.BATCH, top + 1)
    assert raises(EncodeError, batch.add_record, buf, batch.HEADER, top + 1, TOPIC, b"")
    assert raises(EncodeError, batch.add_record, buf, batch.HEADER, -1, TOPIC, b"")


def test_encode_limits():
    buf = bytearray(20)
    off = batch.begin(buf, batch.BATCH, 1)
    assert raises(EncodeError, batch.add_record, buf, off, 1, b"", b"x")  # no topic
    assert raises(EncodeError, batch.add_record, buf, off, 1, b"\x08" * 256, b"")
    assert raises(EncodeError, batch.add_record, buf, off, 1, TOPIC, b"x" * 10)  # no room
    assert raises(EncodeError, batch.begin, bytearray(4), batch.BATCH, 1)


def test_malformed_batches():
    good = _batch()
    # every cut of a good batch (but the whole and the empty one) is refused whole
    for n in range(len(good)):
        if n in (batch.HEADER + 14, batch.HEADER + 14 + 11):
            continue  # a cut at a record boundary is a shorter, valid batch
        assert raises(DecodeError, batch.decode_batch, good[:n]), n
    for hx in ("c0", "c001020304",  # no records
               "c1 01020304",  # acks, not a batch
               "c0 41020304 00000005 03 080174 0000",  # epoch above 2**30
               "c0 01020304 40000000 03 080174 0000",  # seq above 2**30
               "c0 01020304 00000005 00 0000",  # same-topic with no topic before
               "c0 01020304 00000005 09 080174 0000",  # topic longer than the frame
               "c0 01020304 00000005 03 080174 00ff 00"):  # payload longer than the frame
        assert raises(DecodeError, batch.decode_batch, unhex(hx)), hx


def test_malformed_acks():
    for hx in ("", "c1", "c1 010203", "c1 01020304 00000005", "c1 01020304 0000000500",
               "c0 01020304",
               "c1 01020304 00000005 0000",  # an empty run
               "c1 01020304 3fffffff 0002"):  # a run past the largest seq
        assert raises(DecodeError, batch.ack_runs, unhex(hx)), hx


def test_frame_inplace_is_encode_frame_bytes():
    seq = lambda a, b: bytes(range(a, b))  # noqa: E731
    payloads = [b"", b"\x00", b"\x00\x00", b"ab\x00", b"\x11" * 251, b"\x11" * 252,
                b"\x11" * 253, b"\x11" * 254, b"\x11" * 255, b"\x11" * 508,
                b"\x11" * 252 + b"\x00", b"\x11" * 254 + b"\x00" + b"\x22" * 300,
                seq(1, 256) * 3, b"\x00" * 260, seq(0, 256) + b"\x00" + seq(0, 256), _batch()]
    payloads += crc_with_zero_byte()
    assert len(payloads) == 19  # the CRC search found three
    out = bytearray(framing.frame_size_max(800) + 3)
    for p in payloads:
        data = bytearray(p) + b"\xee\xee\xee"  # two spare bytes and one more
        n = batch.frame_inplace(out, 3, data, len(p))
        assert bytes(out[3 : 3 + n]) == framing.encode(p), len(p)
        assert data[len(p) + 2] == 0xEE  # nothing written past the CRC's two bytes
    assert raises(EncodeError, batch.frame_inplace, out, 0, bytearray(b"ab"), 1)
    assert raises(EncodeError, batch.frame_inplace, bytearray(4), 0, bytearray(9), 5)


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_batch_frames")
