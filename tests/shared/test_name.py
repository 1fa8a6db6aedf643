# Tests of pubmote_wire.name: URIs both ways, typed components, prefix, order, malformed names.
from pubmote_wire import name
from pubmote_wire.errors import DecodeError, EncodeError
from runner import hexs, raises, unhex

# (uri, name hex, canonical uri or None when the uri is already canonical)
URIS = [
    ("/", "", None),
    ("/a", "080161", None),
    ("/a/b", "080161080162", None),
    ("/a/b/", "080161080162", "/a/b"),
    ("ndn:/a", "080161", "/a"),
    ("ndn://authority/a", "080161", "/a"),
    ("a/b", "080161080162", "/a/b"),
    ("", "", "/"),
    ("/AZaz09-._~", "080a415a617a30392d2e5f7e", None),
    ("/%00%20%2F%25%7f%FF", "080600202f257fff", "/%00%20%2F%25%7F%FF"),
    ("/hello%20world", "080b68656c6c6f20776f726c64", None),
    ("/a b", "0803612062", "/a%20b"),
    ("/...", "0800", None),
    ("/....", "08012e", None),
    ("/.....", "08022e2e", None),
    ("/%2E%2E%2E%2E", "08012e", "/...."),
    ("/a.b", "0803612e62", None),
    ("/seg=3", "320103", None),
    ("/seg=256", "32020100", None),
    ("/off=0", "340100", None),
    ("/v=65536", "360400010000", None),
    ("/t=1700000000000", "38080000018bcfe56800", None),
    ("/seq=9", "3a0109", None),
    ("/32=kw", "20026b77", None),
    ("/9=x", "090178", None),
    ("/8=abc", "0803616263", "/abc"),
    ("/50=%01%02%03", "3203010203", None),
    ("/sha256digest=" + "ab" * 32, "0120" + "ab" * 32, None),
    ("/sha256digest=" + "AB" * 32, "0120" + "ab" * 32, "/sha256digest=" + "ab" * 32),
    ("/params-sha256=" + "01" * 32, "0220" + "01" * 32, None),
    ("/1=" + "%01" * 32, "0120" + "01" * 32, "/sha256digest=" + "01" * 32),
    ("/a=b", "0803613d62", "/a%3Db"),
    ("/65535=z", "fdffff017a", None),
    ("/253=z", "fd00fd017a", None),
]

BAD_URIS = [
    "/a//b",
    "/.",
    "/..",
    "/a/./b",
    "/%",
    "/%4",
    "/%zz",
    "/seg=",
    "/seg=x",
    "/seg=-1",
    "/seg=18446744073709551616",
    "/0=a",
    "/65536=a",
    "/sha256digest=00",
    "/sha256digest=" + "zz" * 32,
    "/params-sha256=" + "00" * 31,
    "/2=abc",
]


def test_from_uri_table():
    for uri, hx, _ in URIS:
        got = name.from_uri(uri)
        assert hexs(got) == hx, uri


def test_to_uri_table():
    for uri, hx, canon in URIS:
        assert name.to_uri(unhex(hx)) == (canon or uri), uri


def test_uri_roundtrip_of_canonical():
    for uri, hx, canon in URIS:
        c = canon or uri
        assert name.from_uri(c) == unhex(hx)


def test_bad_uris():
    for uri in BAD_URIS:
        assert raises(DecodeError, name.from_uri, uri), uri
    assert raises(DecodeError, name.from_uri, b"/a")


def test_typed_constructors():
    assert name.generic(b"a") == unhex("080161")
    assert name.generic("a") == unhex("080161")
    assert name.generic(bytes(300))[:4] == unhex("08fd012c")
    assert name.component(0x20, b"kw") == unhex("20026b77")
    assert name.keyword(b"kw") == unhex("20026b77")
    assert name.segment(0) == unhex("320100")
    assert name.segment(0x1234) == unhex("32021234")
    assert name.byte_offset(0x10000) == unhex("340400010000")
    assert name.version(1 << 32) == unhex("36080000000100000000")
    assert name.timestamp(7) == unhex("380107")
    assert name.sequence(255) == unhex("3a01ff")
    assert name.params_digest(bytes(32)) == unhex("0220") + bytes(32)
    assert name.implicit_digest(bytes(32)) == unhex("0120") + bytes(32)
    assert raises(EncodeError, name.params_digest, bytes(31))
    assert raises(EncodeError, name.implicit_digest, bytes(33))
    assert raises(EncodeError, name.component, 0, b"")
    assert raises(EncodeError, name.component, 0x10000, b"")


def test_components_count_type_value():
    n = name.from_uri("/a/seg=5/%00")
    cs = name.components(n)
    assert [bytes(c) for c in cs] == [unhex("080161"), unhex("320105"), unhex("080100")]
    assert name.count(n) == 3
    assert name.count(b"") == 0
    t, v = name.component_type_value(cs[1])
    assert t == 0x32 and bytes(v) == b"\x05"
    assert raises(DecodeError, name.component_type_value, unhex("08016162"))


PREFIXES = [
    ("/", "/", True),
    ("/", "/a", True),
    ("/a", "/a", True),
    ("/a", "/a/b", True),
    ("/a/b", "/a", False),
    ("/a", "/ab", False),
    ("/b", "/a/b", False),
    ("/a/b", "/a/b/c", True),
]


def test_is_prefix_table():
    for a, b, want in PREFIXES:
        assert name.is_prefix(name.from_uri(a), name.from_uri(b)) is want, (a, b)


# Each name is strictly before the next one in NDN canonical order.
ORDERED = [
    "/",
    "/sha256digest=" + "00" * 32,
    "/sha256digest=" + "ff" * 32,
    "/params-sha256=" + "00" * 32,
    "/...",
    "/...",
    "/a",
    "/a/b",
    "/a/seg=1",
    "/b",
    "/z",
    "/%00%00",
    "/aa",
    "/ab",
    "/ba",
    "/ba/a",
    "/9=a",
    "/32=a",
    "/seg=0",
    "/seg=1",
    "/seg=256",
    "/v=0",
]


def test_canonical_order_table():
    names = [name.from_uri(u) for u in ORDERED]
    for i in range(len(names) - 1):
        a = names[i]
        b = names[i + 1]
        if a == b:
            assert name.compare(a, b) == 0
        else:
            assert name.compare(a, b) == -1, (ORDERED[i], ORDERED[i + 1])
            assert name.compare(b, a) == 1
    for i in range(len(names)):
        assert name.compare(names[i], names[i]) == 0


def test_size_and_write():
    for n in (b"", name.from_uri("/a/b"), name.generic(bytes(300))):
        buf = bytearray(name.size(n) + 2)
        k = name.write(buf, 1, n)
        assert k == name.size(n)
        assert buf[1] == 7
        assert bytes(buf[k + 1 - len(n) : k + 1]) == n
    buf = bytearray(8)
    assert name.write(buf, 0, name.from_uri("/a")) == 5
    assert bytes(buf[:5]) == unhex("0703080161")


MALFORMED = [
    "08",
    "0802",
    "080261",
    "000161",
    "fe00010000" + "00",
    "fd",
    "fd0108",
    "0801",
    "021f" + "00" * 31,
    "0221" + "00" * 33,
    "011f" + "00" * 31,
    "08fd0100" + "00" * 10,
    "08ff0000000000000001",
]


def test_validate_malformed():
    for hx in MALFORMED:
        assert raises(DecodeError, name.validate, unhex(hx)), hx
    for _uri, hx, _ in URIS:
        name.validate(unhex(hx))
        name.validate(memoryview(unhex(hx)))
        name.validate(bytearray(unhex(hx)))


def test_malformed_in_other_functions():
    for hx in MALFORMED:
        n = unhex(hx)
        assert raises(DecodeError, name.to_uri, n)
        assert raises(DecodeError, name.count, n)
        assert raises(DecodeError, name.components, n)


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_name")
