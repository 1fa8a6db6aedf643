"""A generated corpus of hostile bytes for every decoder of peer bytes: CBOR nested to
10,000 levels (arrays, maps, tags, indefinite items, shared references), every class of
tag number, bignums of every size class, unterminated indefinite items, lying lengths,
NaN and infinities, text that is not UTF-8, simple values, reserved heads, rich markup
and terminal escapes; bencode and KRPC of the same kinds. Each entry is (name, bytes)."""

from __future__ import annotations

import struct

from pubmote.dht import bencode

DEPTHS = (65, 200, 1000, 10_000)
SP_MAX = 60_000  # what fits in one SP message (64 kB) with its topic

def head(major: int, arg: int) -> bytes:
    """A CBOR head in its shortest form."""
    m = major << 5
    if arg < 24:
        return bytes((m | arg,))
    for ai, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if arg < 1 << (8 * struct.calcsize(fmt)):
            return bytes((m | ai,)) + struct.pack(fmt, arg)
    raise ValueError(arg)


def text(s: str) -> bytes:
    b = s.encode()
    return head(3, len(b)) + b


TAGS = (0, 1, 2, 3, 4, 5, 21, 22, 23, 24, 25, 28, 29, 30, 32, 33, 34, 35, 36, 37, 38, 52,
        54, 100, 256, 258, 260, 261, 262, 263, 266, 269, 1004, 1040, 55799, 0xFFFF,
        0x10000, 0xFFFFFFFF, 1 << 32, (1 << 64) - 1)
TAG_CONTENTS = {"int": b"\x01", "neg": b"\x3b" + b"\xff" * 8, "text": text("2013-03-21T20:04Z"),
                "bytes": b"\x48" + b"\x01" * 8, "array": b"\x82\x01\x02",
                "map": b"\xa1\x00\x00", "nothing": b""}


def cbor_corpus() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for d in DEPTHS:
        out += [("array-depth-%d" % d, b"\x81" * d + b"\x00"),
                ("map-depth-%d" % d, b"\xa1\x00" * d + b"\x00"),
                ("map-key-depth-%d" % d, b"\xa1" * d + b"\x00" * (d + 1)),
                ("indef-array-depth-%d" % d, b"\x9f" * d + b"\xff" * d),
                ("indef-map-depth-%d" % d, b"\xbf\x00" * d + b"\x00" + b"\xff" * d),
                ("tag-depth-%d" % d, b"\xc6" * d + b"\x00"),
                ("shareable-depth-%d" % d, b"\xd8\x1c\x81" * d + b"\xd8\x1d\x00"),
                ("mixed-depth-%d" % d, b"\x81\xa1\x00\xd8\x1c\x9f" * (d // 4) + b"\x00")]
    out += [("self-ref-list", bytes.fromhex("d81c81d81d00")),
            ("self-ref-map", bytes.fromhex("d81ca100d81d00")),
            ("ref-to-nothing", bytes.fromhex("d81d05")),
            ("refs-fan-out", bytes.fromhex("d81c82") + bytes.fromhex("d81c82d81d00d81d00")
             + bytes.fromhex("d81d01"))]
    for tag in TAGS:
        for name, content in TAG_CONTENTS.items():
            out.append(("tag-%d-%s" % (tag, name), head(6, tag) + content))
    for size in (0, 1, 8, 9, 100, 1793, 2048, 30_000, 600_000):
        for tag in (2, 3):
            out.append(("bignum-tag%d-%dB" % (tag, size),
                        head(6, tag) + head(2, size) + b"\xff" * size))
    big = head(6, 2) + head(2, 2048) + b"\x7f" * 2048
    out += [("fraction-of-bignums", head(6, 30) + b"\x82" + big + big),
            ("decimal-huge-exponent", bytes.fromhex("c4821b7fffffffffffffff01")),
            ("bigfloat-huge-exponent", bytes.fromhex("c5821b7fffffffffffffff01")),
            ("bignum-map-value", b"\xa1" + text("value") + big),
            ("set-of-bignums", head(6, 258) + b"\x82" + big + head(6, 2) + b"\x41\x01")]
    for name, lead, item in (("array", b"\x9f", b"\x01"), ("map", b"\xbf", b"\x01\x02"),
                             ("bytes", b"\x5f", b"\x41\x01"), ("text", b"\x7f", b"\x61a")):
        out += [("indef-%s-unterminated" % name, lead + item * 3),
                ("indef-%s-empty-unterminated" % name, lead),
                ("indef-%s-nested-unterminated" % name, (lead + item) * 500)]
    out += [("indef-map-odd", b"\xbf\x01\xff"), ("indef-bytes-bad-chunk", b"\x5f\x61a\xff"),
            ("indef-text-nested-indef", b"\x7f\x7f\xff\xff"), ("lone-break", b"\xff"),
            ("break-in-definite", b"\x82\x01\xff")]
    for major in (2, 3, 4, 5):
        for arg in (1 << 16, (1 << 32) - 1, 1 << 63, (1 << 64) - 1):
            out.append(("length-major%d-%d" % (major, arg), head(major, arg) + b"\x00" * 8))
    for name, h in (("half-nan", "f97e00"), ("half-inf", "f97c00"), ("half-neg-inf", "f9fc00"),
                    ("single-nan", "fa7fc00000"), ("single-inf", "fa7f800000"),
                    ("double-nan", "fb7ff8000000000000"), ("double-neg-inf", "fbfff0000000000000"),
                    ("double-nan-payload", "fb7ff0000000000001"), ("neg-zero", "f98000"),
                    ("nan-key", "a1f97e0001"), ("inf-in-map", "a16576616c7565f97c00")):
        out.append((name, bytes.fromhex(h)))
    for i, bad in enumerate((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\x80",
                             b"\xf4\x90\x80\x80", b"a\x80", b"\xe2\x82")):
        out += [("bad-utf8-%d" % i, head(3, len(bad)) + bad),
                ("bad-utf8-key-%d" % i, b"\xa1" + head(3, len(bad)) + bad + b"\x00"),
                ("bad-utf8-chunk-%d" % i, b"\x7f" + head(3, len(bad)) + bad + b"\xff")]
    for ib in (0xE0, 0xF0, 0xF3, 0xF7, 0xFC, 0xFD, 0xFE, 0x1C, 0x1D, 0x1E, 0x1F, 0x3F, 0x5C,
               0x7D, 0x9E, 0xBC, 0xDC, 0xDF):
        out.append(("head-%02x" % ib, bytes((ib,)) + b"\x00" * 8))
    for v in (0, 19, 20, 24, 31, 32, 255):
        out.append(("simple-f8-%d" % v, bytes((0xF8, v))))
    out += [("items-over-cap", b"\x9a\x00\x01\x00\x01" + b"\x00" * 0x10001),
            ("empty-arrays", b"\x9a\x00\x00\x40\x00" + b"\x80" * 0x4000),
            ("array-key", bytes.fromhex("a1810000")), ("map-key", bytes.fromhex("a1a000")),
            ("truncated-u64", bytes.fromhex("1b0000")), ("trailing", b"\x00\x00"),
            ("empty", b""), ("over-input-cap", b"\x5a\x00\x10\x00\x00" + b"\x00" * (1 << 20)),
            ("markup-text", text("[/oops] [bold")), ("markup-raw", b"[/oops]"),
            ("terminal-escape-text", text("\x1b]0;pwned\x07\x1b[2J")),
            ("terminal-escape-raw", b"\x1b[2J\x1b[H\r\nforged line"),
            ("markup-in-map", b"\xa1" + text("[/x]") + text("[red]\x1b[31m"))]
    return out


def bencode_corpus() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for d in DEPTHS:
        out += [("list-depth-%d" % d, b"l" * d + b"e" * d),
                ("dict-depth-%d" % d, b"d1:a" * d + b"i0e" + b"e" * d),
                ("list-unterminated-%d" % d, b"l" * d)]
    out += [("string-length-huge", b"99999999999999999999:x"),
            ("string-length-lies", b"5:ab"), ("int-long", b"i" + b"9" * 10_000 + b"e"),
            ("int-minus-zero", b"i-0e"), ("int-leading-zero", b"i03e"), ("int-empty", b"ie"),
            ("int-unterminated", b"i12"), ("keys-unsorted", b"d1:bi0e1:ai0ee"),
            ("keys-duplicate", b"d1:ai0e1:ai0ee"), ("key-not-string", b"di1ei2ee"),
            ("items-over-cap", b"l" + b"i0e" * 5000 + b"e"), ("over-input", b"0:" * 40_000),
            ("trailing", b"i1ei2e"), ("empty", b""), ("garbage", b"\x00\xff\xfe")]
    tid, nid = b"aa", b"N" * 20
    for name, msg in (
            ("query-args-not-dict", {b"t": tid, b"y": b"q", b"q": b"ping", b"a": [1]}),
            ("query-id-short", {b"t": tid, b"y": b"q", b"q": b"ping", b"a": {b"id": b"x"}}),
            ("find-node-target-list", {b"t": tid, b"y": b"q", b"q": b"find_node",
                                       b"a": {b"id": nid, b"target": [b"x"]}}),
            ("get-target-deep", {b"t": tid, b"y": b"q", b"q": b"get",
                                 b"a": {b"id": nid, b"target": [[[[b"x"]]]], b"seq": -1}}),
            ("put-deep-v", {b"t": tid, b"y": b"q", b"q": b"put",
                            b"a": {b"id": nid, b"token": b"t" * 8, b"v": [[[[[[1]]]]]]}}),
            ("put-mutable-bad", {b"t": tid, b"y": b"q", b"q": b"put",
                                 b"a": {b"id": nid, b"token": b"t" * 8, b"k": b"k" * 32,
                                        b"seq": 10 ** 19, b"sig": b"s" * 64, b"v": [1, [2]],
                                        b"salt": [b"x"], b"cas": b"no"}}),
            ("announce-port-bytes", {b"t": tid, b"y": b"q", b"q": b"announce_peer",
                                     b"a": {b"id": nid, b"info_hash": nid, b"port": b"80",
                                            b"token": b"t" * 8}}),
            ("method-not-ascii", {b"t": tid, b"y": b"q", b"q": b"\xff\xfe",
                                  b"a": {b"id": nid}}),
            ("topic-not-20", {b"t": tid, b"y": b"q", b"q": b"ping", b"c": b"c",
                              b"a": {b"id": nid}}),
            ("topic-list", {b"t": tid, b"y": b"q", b"q": b"ping", b"c": [b"c"],
                            b"a": {b"id": nid}}),
            ("tid-long", {b"t": b"t" * 100, b"y": b"q", b"q": b"ping", b"a": {b"id": nid}}),
            ("response-r-list", {b"t": tid, b"y": b"r", b"r": [1]}),
            ("error-e-deep", {b"t": tid, b"y": b"e", b"e": [[[[1]]], [b"x"]]}),
            ("kind-unknown", {b"t": tid, b"y": b"z"})):
        out.append(("krpc-" + name, bencode.encode(msg)))
    return out


CBOR = cbor_corpus()
BENCODE = bencode_corpus()
CBOR_IDS = [n for n, _ in CBOR]
BENCODE_IDS = [n for n, _ in BENCODE]
