# Tests of pubmote_wire.tlv: exact bytes at every var-number boundary, malformed input.
from pubmote_wire import tlv
from pubmote_wire.errors import DecodeError, EncodeError
from runner import raises, unhex

VARNUMS = [
    (0, "00"),
    (252, "fc"),
    (253, "fd00fd"),
    (0xFFFF, "fdffff"),
    (0x10000, "fe00010000"),
    (0xFFFFFFFF, "feffffffff"),
    (0x100000000, "ff0000000100000000"),
    (0xFFFFFFFFFFFFFFFF, "ffffffffffffffffff"),
]

NONNEGS = [
    (0, "00"),
    (255, "ff"),
    (256, "0100"),
    (0xFFFF, "ffff"),
    (0x10000, "00010000"),
    (0xFFFFFFFF, "ffffffff"),
    (0x100000000, "0000000100000000"),
]


def test_varnum_roundtrip_at_boundaries():
    buf = bytearray(12)
    for n, hx in VARNUMS:
        want = unhex(hx)
        assert tlv.varnum_size(n) == len(want)
        size = tlv.write_varnum(buf, 1, n)
        assert size == len(want)
        assert bytes(buf[1 : 1 + size]) == want
        assert tlv.read_varnum(buf, 1, 1 + size) == (n, size)


def test_varnum_too_large():
    assert raises(EncodeError, tlv.varnum_size, 1 << 64)
    assert raises(EncodeError, tlv.write_varnum, bytearray(10), 0, 1 << 64)


def test_varnum_truncated():
    for hx in ("", "fd", "fd00", "fe000000", "ff00000000000000"):
        assert raises(DecodeError, tlv.read_varnum, unhex(hx), 0)


def test_nonneg_roundtrip():
    buf = bytearray(8)
    for n, hx in NONNEGS:
        want = unhex(hx)
        size = tlv.write_nonneg(buf, 0, n)
        assert bytes(buf[:size]) == want
        assert tlv.read_nonneg(buf, 0, size) == n


def test_nonneg_bad_length():
    for n in (0, 3, 5, 9):
        assert raises(DecodeError, tlv.read_nonneg, bytes(9), 0, n)
    assert raises(DecodeError, tlv.read_nonneg, bytes(3), 0, 4)
    assert raises(EncodeError, tlv.nonneg_size, -1)


def test_reader_walks_elements():
    data = unhex("0801610a0401020304" + "fd010003616263")
    r = tlv.TLVReader(data)
    assert r.next() and r.typ == 8 and bytes(r.value()) == b"a"
    assert r.next() and r.typ == 10 and r.nonneg() == 0x01020304
    assert r.next() and r.typ == 256 and bytes(r.value()) == b"abc"
    assert not r.next()


def test_reader_rejects_overlong_length():
    # claimed lengths up to 2^64-1 never allocate, they fail at once
    for hx in ("0805616263", "08ffffffffffffffffff", "08fe7fffffff00", "fd", "08"):
        r = tlv.TLVReader(unhex(hx))
        assert raises(DecodeError, r.next)


def test_critical_rule():
    assert tlv.is_critical(7) and tlv.is_critical(31) and tlv.is_critical(33)
    assert not tlv.is_critical(32) and not tlv.is_critical(800)
    r = tlv.TLVReader(unhex("2100"))
    r.next()
    assert raises(DecodeError, r.skip_unknown)
    r = tlv.TLVReader(unhex("fd032000"))
    r.next()
    r.skip_unknown()


def test_write_tlv_and_nonneg_tlv():
    buf = bytearray(16)
    n = tlv.write_tlv(buf, 0, 0x15, b"hi")
    assert bytes(buf[:n]) == unhex("15026869")
    n = tlv.write_nonneg_tlv(buf, 0, 0x0C, 4000)
    assert bytes(buf[:n]) == unhex("0c020fa0")
    assert tlv.nonneg_tlv_size(0x0C, 4000) == 4


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_tlv")
