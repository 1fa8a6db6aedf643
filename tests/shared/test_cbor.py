# Tests of pubmote_wire.cbor: RFC 8949 Appendix A examples for the subset, bounds, malformed input.
# unix-heap: 80k  (compiling the float tables of both widths from source; the 64-bit port doubles every object)
import struct

from pubmote_wire import cbor
from pubmote_wire.errors import DecodeError, EncodeError
from runner import raises, unhex

# (value, hex) pairs from RFC 8949 Appendix A that encode exactly as given.
ROUNDTRIP = [
    (0, "00"),
    (1, "01"),
    (10, "0a"),
    (23, "17"),
    (24, "1818"),
    (25, "1819"),
    (100, "1864"),
    (1000, "1903e8"),
    (1000000, "1a000f4240"),
    (1000000000000, "1b000000e8d4a51000"),
    (18446744073709551615, "1bffffffffffffffff"),
    (-18446744073709551616, "3bffffffffffffffff"),
    (-1, "20"),
    (-10, "29"),
    (-100, "3863"),
    (-1000, "3903e7"),
    (False, "f4"),
    (True, "f5"),
    (None, "f6"),
    (b"", "40"),
    (b"\x01\x02\x03\x04", "4401020304"),
    ("", "60"),
    ("a", "6161"),
    ("IETF", "6449455446"),
    ('"\\', "62225c"),
    ("\u00fc", "62c3bc"),
    ("\u6c34", "63e6b0b4"),
    ("\U00010151", "64f0908591"),
    ([], "80"),
    ([1, 2, 3], "83010203"),
    ([1, [2, 3], [4, 5]], "8301820203820405"),
    (list(range(1, 26)), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
    ({}, "a0"),
    ({1: 2, 3: 4}, "a201020304"),
    ({"a": 1, "b": [2, 3]}, "a26161016162820203"),
    (["a", {"b": "c"}], "826161a161626163"),
    ({"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}, "a56161614161626142616361436164614461656145"),
    # head-width boundaries
    (255, "18ff"),
    (256, "190100"),
    (65535, "19ffff"),
    (65536, "1a00010000"),
    (4294967295, "1affffffff"),
    (4294967296, "1b0000000100000000"),
    (-24, "37"),
    (-25, "3818"),
]

# Floats (docs/protocols/cbor-floats.md). SINGLE: this runtime's floats are IEEE single
# precision (the RP2040 and ESP32 ports); the unix and WebAssembly ports and CPython use
# doubles. Checked without the code under test: 1 + 2**-30 is 1 in single precision.
import math  # noqa: E402

SINGLE = 1.0 + math.ldexp(1.0, -30) == 1.0


def f32(bits_hex):
    """The float32 whose IEEE bits are bits_hex (exact on every runtime)."""
    return struct.unpack(">f", unhex(bits_hex))[0]


# Values every runtime holds exactly, written so that no decimal parser is involved (a
# single-precision MicroPython parses some decimal literals one ulp off): (CBOR hex, value).
# These decode to the value and, in the width given, encode to the same bytes everywhere.
FLOATS = [
    ("f90000", 0.0),
    ("f93c00", 1.0),
    ("f93e00", 1.5),
    ("f97bff", 65504.0),
    ("fa47c35000", 100000.0),
    ("fa7f7fffff", math.ldexp(16777215.0, 104)),  # the largest float32
    ("f90001", math.ldexp(1.0, -24)),  # the smallest half subnormal
    ("f90003", math.ldexp(3.0, -24)),
    ("f90400", math.ldexp(1.0, -14)),  # the smallest half normal
    ("fa33000000", math.ldexp(1.0, -25)),  # below every half: a float32
    ("fa477ff000", 65520.0),  # above the largest half
    ("f9c400", -4.0),
    ("f97c00", float("inf")),
    ("f9fc00", float("-inf")),
]
# Inputs of other widths that decode to the same values (never what we write ourselves)
FLOATS_OTHER_WIDTHS = [
    ("fb3ff8000000000000", 1.5),
    ("fa3fc00000", 1.5),
    ("fa7f800000", float("inf")),
    ("faff800000", float("-inf")),
    ("fb7ff0000000000000", float("inf")),
    ("fbfff0000000000000", float("-inf")),
]
# Where the width matters: (CBOR hex of the double, its value on a double runtime, the
# float32 bits a single-precision runtime reads it as: the nearest, or infinity beyond
# float32's range, IEEE round-to-nearest-even).
DOUBLES = [
    ("fb3ff199999999999a", 1.1, "3f8ccccd"),
    ("fbc010666666666666", -4.1, "c0833333"),
    ("fb3fb999999999999a", 0.1, "3dcccccd"),
    ("fb7e37e43c8800759c", 1.0e300, "7f800000"),
    ("fbfe37e43c8800759c", -1.0e300, "ff800000"),
]
# A float32 value travels as float32 from every runtime: (float32 bits, CBOR hex)
SINGLES = [
    ("3dcccccd", "fa3dcccccd"),  # 0.1 on a single-precision board
    ("3f8ccccd", "fa3f8ccccd"),  # 1.1
    ("c0833333", "fac0833333"),  # -4.1
    ("41ac0000", "f94d60"),  # 21.5, a typical reading: half holds it
]
NANS = ["f97e00", "fa7fc00000", "fb7ff8000000000000"]

MALFORMED = [
    "",  # nothing
    "18", "1900", "1a000000", "1b00000000000000",  # truncated heads
    "1c", "1d", "1e", "3f", "1f",  # reserved additional info / indefinite int
    "5f42010243030405ff", "7f657374726561646d696e67ff",  # indefinite strings
    "9fff", "9f018202039f0405ffff", "bf61610161629f0203ffff",  # indefinite containers
    "41", "440102", "62 61",  # truncated strings
    "61ff", "62c328", "62c080", "63eda080", "64f4908080", "62e282",  # bad UTF-8
    "81", "8201", "a101", "a1",  # truncated containers
    "9bffffffffffffffff00000000000000000000",  # a 2^64-1 item array in 10 bytes
    "bbffffffffffffffff00000000000000000000",
    "5bffffffffffffffff0000",
    "c074323031332d30332d32315432303a30343a30305a", "d82076687474703a2f2f7777772e6578616d706c652e636f6d",
    "f7", "f0", "f8ff", "f820", "ff", "fc", "fd", "fe", "f9", "fa0000", "fb00",
    "a201020103",  # duplicate key
    "a1800102", "a1a00102",  # array / map as key
]


def test_roundtrip_exact_bytes():
    buf = bytearray(64)
    for value, hx in ROUNDTRIP:
        want = unhex(hx)
        assert cbor.dumps(value) == want, hx
        assert cbor.size(value) == len(want)
        assert cbor.encode_into(buf, 3, value) == len(want)
        assert bytes(buf[3 : 3 + len(want)]) == want
        got = cbor.loads(want)
        assert got == value and type(got) is type(value), hx
        assert cbor.decode(b"\xff\xff" + want + b"\x00", 2) == (value, len(want))


def test_tuple_and_bytearray_encode_like_list_and_bytes():
    assert cbor.dumps((1, 2, 3)) == unhex("83010203")
    assert cbor.dumps(bytearray(b"\x01\x02")) == unhex("420102")
    assert cbor.dumps(memoryview(b"\x01\x02")) == unhex("420102")


def _bits(x):
    return struct.pack(">d", x)


def test_float_decode():
    for hx, value in FLOATS + FLOATS_OTHER_WIDTHS:
        got = cbor.loads(unhex(hx))
        assert type(got) is float
        assert got == value, hx
    for hx in NANS:
        got = cbor.loads(unhex(hx))
        assert got != got
    neg_zero = cbor.loads(unhex("f98000"))
    assert _bits(neg_zero) == _bits(-0.0)


def test_float_decode_double_both_widths():
    for hx, double_value, single_bits in DOUBLES:
        got = cbor.loads(unhex(hx))
        assert type(got) is float
        if SINGLE:
            assert got == f32(single_bits), hx
        else:
            assert got == double_value, hx


def test_float_encode_preferred():
    # RFC 8949 4.2.2: the shortest width that holds the value, the same on every runtime
    buf = bytearray(16)
    for hx, value in FLOATS:
        want = unhex(hx)
        assert cbor.dumps(value) == want, hx
        assert cbor.size(value) == len(want), hx
        assert cbor.encode_into(buf, 1, value) == len(want)
        assert bytes(buf[1 : 1 + len(want)]) == want
    assert cbor.dumps(-0.0) == unhex("f98000")
    for v in (float("nan"), -float("nan")):
        assert cbor.dumps(v) == unhex("f97e00")  # one NaN, as the half
    for bits, hx in SINGLES:
        assert cbor.dumps(f32(bits)) == unhex(hx), hx
        assert cbor.loads(unhex(hx)) == f32(bits)


def test_float_encode_double_both_widths():
    # a value only a double holds: a double runtime sends the double, a single-precision
    # one has only the nearest float32 of it, and sends that as float32
    for hx, double_value, single_bits in DOUBLES:
        if SINGLE:
            v = f32(single_bits)
            want = cbor.dumps(v)
            assert len(want) in (3, 5), hx
            assert cbor.loads(want) == v
        else:
            assert cbor.dumps(double_value) == unhex(hx), hx
    if SINGLE:
        assert cbor.dumps(0.1) == unhex("fa3dcccccd")
        assert cbor.dumps(1.0e300) == unhex("f97c00")  # the literal is infinity there
    else:
        assert cbor.dumps(0.1) == unhex("fb3fb999999999999a")
        assert cbor.dumps(1.0e300) == unhex("fb7e37e43c8800759c")
        assert cbor.dumps(math.ldexp(1.0, -1074)) == unhex("fb0000000000000001")


def test_malformed():
    for hx in MALFORMED:
        assert raises(DecodeError, cbor.loads, unhex(hx)), hx


def test_trailing_bytes():
    assert raises(DecodeError, cbor.loads, unhex("0000"))
    assert raises(DecodeError, cbor.loads, unhex("8000"))
    assert cbor.decode(unhex("0000"), 0) == (0, 1)


def test_depth_limit():
    ok = unhex("81" * 16 + "00")
    v = cbor.loads(ok)
    for _ in range(16):
        assert type(v) is list
        v = v[0]
    assert v == 0
    assert raises(DecodeError, cbor.loads, unhex("81" * 17 + "00"))
    assert raises(DecodeError, cbor.loads, unhex("a101" * 17 + "00"))
    assert raises(DecodeError, cbor.loads, unhex("81" * 1000))
    deep = 0
    for _ in range(16):
        deep = [deep]
    assert cbor.loads(cbor.dumps(deep)) == deep
    assert raises(EncodeError, cbor.dumps, [deep])


def test_encode_errors():
    for bad in (1 << 64, -(1 << 64) - 1, {1, 2}, object()):
        assert raises(EncodeError, cbor.dumps, bad)
    assert raises(EncodeError, cbor.encode_into, bytearray(2), 0, [1, 2, 3])
    cyclic = []
    cyclic.append(cyclic)
    assert raises(EncodeError, cbor.dumps, cyclic)


def test_decode_offset_bounds():
    assert raises(DecodeError, cbor.decode, b"\x00", 2)
    assert raises(DecodeError, cbor.decode, b"\x00", 1)


def test_map_keys_sorted_bytewise():
    # 0x1818 (24) < 0x20 (-1) < 0x626161 ("aa") < 0x626162 ("ab"), whatever the dict order
    d = {"ab": 3, -1: 2, "aa": 1, 24: 4}
    assert cbor.dumps(d) == unhex("a4 181804 2002 62616101 62616203")
    assert cbor.dumps({"b": 1, 2: 2}) == unhex("a2 0202 616201")


def test_envelope_roundtrip():
    env = {"t": "sensors/temp", "v": 21.5, "seq": 1 << 40, "raw": b"\x00\xff", "ok": True, "n": None,
           "list": [-1, -(1 << 63), [], {}], 7: "int key", b"k": False}
    assert cbor.loads(cbor.dumps(env)) == env


def test_memoryview_input():
    data = unhex("a26161016162820203")
    assert cbor.loads(memoryview(data)) == {"a": 1, "b": [2, 3]}
    assert cbor.loads(bytearray(data)) == {"a": 1, "b": [2, 3]}


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_cbor")
