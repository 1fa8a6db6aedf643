# Tests of pubmote_wire.framing: CRC-16/CCITT-FALSE, COBS bytes, chunking, resync, bounds.
from framecases import crc_with_zero_byte
from pubmote_wire import framing
from pubmote_wire.errors import EncodeError
from runner import raises, unhex


def ref_crc(data):
    # Bit-at-a-time reference, independent of the table-free form under test.
    crc = 0xFFFF
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def ref_cobs(data):
    # Straight from the COBS paper: split at zeros, blocks of at most 254 bytes; a full
    # block at the very end is not followed by an empty one (the canonical form).
    out = bytearray()
    block = bytearray()
    just_full = False
    for b in data:
        just_full = False
        if b == 0:
            out.append(len(block) + 1)
            out += block
            block = bytearray()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255)
                out += block
                block = bytearray()
                just_full = True
    if not just_full:
        out.append(len(block) + 1)
        out += block
    return bytes(out)


def seq(a, b):
    return bytes(range(a, b))


# Wikipedia's COBS examples (input, output without the delimiter).
COBS = [
    ("00", "0101"),
    ("0000", "010101"),
    ("001100", "01021101"),
    ("11220033", "0311220233"),
    ("11223344", "0511223344"),
    ("11000000", "0211010101"),
]


def test_crc_check_value():
    assert framing.crc16(b"123456789") == 0x29B1
    assert framing.crc16(b"") == 0xFFFF
    for data in (b"\x00", b"\xff" * 7, seq(0, 256)):
        assert framing.crc16(data) == ref_crc(data)


def test_reference_cobs_matches_wikipedia():
    for hx, want in COBS:
        assert ref_cobs(unhex(hx)) == unhex(want)
    assert ref_cobs(seq(1, 255)) == b"\xff" + seq(1, 255)
    assert ref_cobs(b"\x00" + seq(1, 255)) == b"\x01\xff" + seq(1, 255)
    assert ref_cobs(seq(1, 256)) == b"\xff" + seq(1, 255) + b"\x02\xff"
    assert ref_cobs(seq(2, 256) + b"\x00") == b"\xff" + seq(2, 256) + b"\x01\x01"
    assert ref_cobs(seq(3, 256) + b"\x00\x01") == b"\xfe" + seq(3, 256) + b"\x02\x01"


def test_exact_frame_bytes():
    assert framing.encode(b"123456789") == unhex("000c31323334353637383929b100")
    assert framing.encode(b"") == unhex("0003ffff00")


def test_frame_is_cobs_of_payload_and_crc():
    payloads = [b"", b"\x00", b"\x00\x00", b"\x11\x22\x00\x33", seq(0, 256), seq(1, 255)]
    for n in (251, 252, 253, 254, 255, 256, 507, 508, 509, 600):
        payloads.append(bytes((i % 255) + 1 for i in range(n)))
        payloads.append(bytes(i % 7 for i in range(n)))
    for p in payloads:
        crc = ref_crc(p)
        body = p + bytes((crc >> 8, crc & 0xFF))
        want = b"\x00" + ref_cobs(body) + b"\x00"
        got = framing.encode(p)
        assert got == want, len(p)
        assert len(got) <= framing.frame_size_max(len(p))
        assert got.count(b"\x00") == 2


def test_encode_into_offset_and_small_buffer():
    buf = bytearray(40)
    n = framing.encode_frame(buf, 5, b"123456789")
    assert bytes(buf[5 : 5 + n]) == unhex("000c31323334353637383929b100")
    assert raises(EncodeError, framing.encode_frame, bytearray(10), 0, b"123456789")


def _split_points(stream):
    # Every split point; on a real board's port (sys.platform rp2, 42 s of the emulated
    # Pico's time for all ~600) every 4th one plus every one within 3 bytes of a frame
    # delimiter, where the decoder changes state. The other runtimes check all of them.
    import sys

    if sys.platform != "rp2":
        return range(len(stream) + 1)
    near = set()
    for i in range(len(stream)):
        if stream[i] == 0:
            for c in range(i - 3, i + 5):
                near.add(c)
    return [c for c in range(len(stream) + 1) if c % 4 == 0 or c in near]


def test_roundtrip_and_every_split_point():
    payloads = [b"hello", b"", b"\x00\x00\x00", seq(0, 256), b"\x00" * 300]
    stream = b"".join(framing.encode(p) for p in payloads)
    for cut in _split_points(stream):
        d = framing.FrameDecoder()
        got = d.feed(stream[:cut]) + d.feed(stream[cut:])
        assert got == payloads, cut
        assert d.frames_ok == len(payloads)
        assert d.frames_bad_crc == 0 and d.frames_bad_cobs == 0 and d.bytes_discarded == 0


def test_byte_at_a_time_memoryview_and_bytearray():
    stream = framing.encode(b"abc") + framing.encode(b"\x00de")
    d = framing.FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += d.feed(memoryview(stream)[i : i + 1])
    assert got == [b"abc", b"\x00de"]
    assert framing.FrameDecoder().feed(bytearray(stream)) == [b"abc", b"\x00de"]


def test_garbage_resync():
    good = framing.encode(b"payload")
    cases = [
        b"\x13\x37\xff\xfe",  # noise, no delimiter: ends at the frame's leading 00
        b"\x00\x00\x00",  # idle delimiters
        b"\x05\x01\x02",  # a torn frame (block cut short)
        b"\x01\x02\x03\x04\x05\x06\x00\x07\x08",  # noise with a zero in it
    ]
    for garbage in cases:
        d = framing.FrameDecoder()
        assert d.feed(garbage + good + garbage + good) == [b"payload", b"payload"]
        assert d.frames_ok == 2


def test_bad_crc_counted():
    frame = bytearray(framing.encode(b"payload"))
    frame[3] ^= 0x01
    d = framing.FrameDecoder()
    assert d.feed(bytes(frame) + framing.encode(b"next")) == [b"next"]
    assert d.frames_bad_crc == 1 and d.frames_ok == 1
    assert d.bytes_discarded == len(frame) - 2


def test_malformed_frames_counted():
    # (raw bytes, counter that must be 1)
    table = [
        ("00051122 00", "frames_bad_cobs"),
        ("00ff112200", "frames_bad_cobs"),
        ("000100", "frames_bad_crc"),  # decodes to nothing: no room for a CRC
        ("00020500", "frames_bad_crc"),  # one byte
        ("00031d0f00", "frames_bad_crc"),  # two bytes that are not crc16(b"")
    ]
    for hx, counter in table:
        d = framing.FrameDecoder()
        assert d.feed(unhex(hx)) == []
        assert getattr(d, counter) == 1, hx
        assert d.frames_ok == 0
        assert d.bytes_discarded > 0


def test_oversize_discarded_and_bounded():
    d = framing.FrameDecoder(max_frame=16)
    size = len(d.buf)
    ok = bytes(range(1, 17))
    stream = framing.encode(bytes(17)) + framing.encode(ok) + framing.encode(b"\x01" * 500)
    stream += framing.encode(b"x")
    assert d.feed(stream) == [ok, b"x"]
    assert d.frames_oversize == 2
    assert len(d.buf) == size
    assert d.bytes_discarded > 500


def test_small_start_grows_once_for_a_bigger_frame():
    # a board's decoder (byte by byte) that starts small: small frames keep the small
    # buffer; the first frame over it grows it to max_frame + 2 mid-frame (in a zero's
    # block and in a run without zeros) and decodes it whole; an oversize one is still
    # dropped; the bytes are a full-size decoder's
    small = [b"ab\x00c", b"\x01" * 16]
    big = [bytes(range(200)) + b"\x00\x00" + b"\x07" * 97, b"\x05" * 298, b"\x00" * 298]
    stream = b"".join(framing.encode(p) for p in small)
    d = framing.FrameDecoder(max_frame=300, bytewise=True, start=16)
    assert len(d.buf) == 18
    assert d.feed(stream) == small and len(d.buf) == 18
    for p in big:
        d2 = framing.FrameDecoder(max_frame=300, bytewise=True, start=16)
        f = framing.encode(p)
        # fed in small reads, as from a UART: the growth happens between two reads too
        got = []
        for i in range(0, len(f), 7):
            got += d2.feed(f[i : i + 7])
        assert got == [p] and len(d2.buf) == 302
    stream += framing.encode(big[0]) + framing.encode(b"\x09" * 301) + framing.encode(b"end")
    got = d.feed(stream)
    assert got == small + [big[0], b"end"] and len(d.buf) == 302
    assert d.frames_oversize == 1
    full = framing.FrameDecoder(max_frame=300, bytewise=True)
    assert full.feed(stream) == got


def test_noise_never_raises():
    # 3000 bytes of noise fed as a serial line delivers them: in reads of a reused buffer
    d = framing.FrameDecoder(max_frame=32)
    x = 12345
    noise = bytearray(300)
    for _ in range(10):
        for i in range(len(noise)):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            noise[i] = (x >> 16) & 0xFF
        d.feed(noise)
    assert d.feed(framing.encode(b"alive")) == [b"alive"]


def test_feed_cb_gives_views():
    seen = []
    d = framing.FrameDecoder()
    n = d.feed_cb(framing.encode(b"one") + framing.encode(b"two"), lambda mv: seen.append(bytes(mv)))
    assert n == 2 and seen == [b"one", b"two"]


def test_frame_size_max_values():
    assert framing.frame_size_max(0) == 5
    assert framing.frame_size_max(252) == 254 + 1 + 1 + 2
    assert framing.MAX_FRAME == 1024


def _parts(payload, size):
    buf = bytearray(size)
    crc = framing.crc16(payload)
    out = b""
    pos = 0
    calls = 0
    while pos >= 0:
        n, pos = framing.encode_frame_part(buf, payload, crc, pos)
        assert n > 0 and n <= size
        out += bytes(buf[0:n])
        calls += 1
    return out, calls


def test_frame_parts_are_encode_frame_bytes():
    payloads = [b"", b"\x00", b"\x00\x00", b"ab\x00", b"\x11" * 251, b"\x11" * 252,
                b"\x11" * 253, b"\x11" * 254, b"\x11" * 255, b"\x11" * 508,
                b"\x11" * 252 + b"\x00", b"\x11" * 254 + b"\x00" + b"\x22" * 300,
                seq(1, 256) * 3, b"\x00" * 260, seq(0, 256) + b"\x00" + seq(0, 256)]
    payloads += crc_with_zero_byte()
    assert len(payloads) > 15  # the CRC search found some
    for p in payloads:
        crc = framing.crc16(p)
        want = b"\x00" + ref_cobs(p + bytes((crc >> 8, crc & 0xFF))) + b"\x00"
        assert framing.encode(p) == want
        for size in (framing.FRAME_PART_MIN, 300):
            got, calls = _parts(p, size)
            assert got == want, (len(p), size)
            if len(want) <= size:
                assert calls == 1  # a frame that fits goes in one part
        assert _parts(memoryview(p), framing.FRAME_PART_MIN)[0] == want


def test_frame_part_buffer_too_small():
    assert raises(EncodeError, framing.encode_frame_part, bytearray(framing.FRAME_PART_MIN - 1),
                  b"abc", framing.crc16(b"abc"), 0)


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_framing")
