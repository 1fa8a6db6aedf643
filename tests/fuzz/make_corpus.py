"""Write the hand-made nasty inputs of the regression corpus (tests/vectors/corpus/<target>/
hand-*): truncated packets, huge claimed lengths, deep nesting, bad var-numbers. The fuzzer's
crash-* files sit next to them. Rerun after changing this file; the output is deterministic.

    python tests/fuzz/make_corpus.py
"""

from __future__ import annotations

import binascii
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "vectors" / "corpus"


def vn(n: int) -> bytes:
    """An NDN var-number."""
    if n < 0xFD:
        return bytes([n])
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "big")
    if n <= 0xFFFFFFFF:
        return b"\xfe" + n.to_bytes(4, "big")
    return b"\xff" + n.to_bytes(8, "big")


def tlv(t: int, v: bytes, claim: int | None = None) -> bytes:
    return vn(t) + vn(len(v) if claim is None else claim) + v


def nest(types: list[int], inner: bytes) -> bytes:
    for t in reversed(types):
        inner = tlv(t, inner)
    return inner


def chunked(stream: bytes, seed: int = 0) -> bytes:
    return bytes([seed]) + stream


def records(pkts: list[bytes], dt: int = 1) -> bytes:
    return b"".join(bytes([dt]) + len(p).to_bytes(2, "big") + p for p in pkts)


def packets() -> dict[str, bytes]:
    data = json.loads((ROOT / "tests" / "vectors" / "ndn_notify.json").read_text())
    return {p["label"]: binascii.unhexlify(p["hex"]) for p in data["packets"]}


def build() -> dict[str, dict[str, bytes]]:
    p = packets()
    ni, mi, md = p["notify Interest"], p["msg Interest"], p["msg Data"]
    name = tlv(8, b"a") + tlv(8, b"b")
    lp_seq = tlv(0x51, (5).to_bytes(8, "big"))
    return {
        "tlv": {
            "empty": b"",
            "huge-length-u64": b"\x05\xff" + b"\xff" * 8,
            "huge-length-u32": b"\x06\xfe\xff\xff\xff\xff" + b"x" * 10,
            "type-u64-max": b"\xff" + b"\xff" * 8 + b"\x00",
            "truncated-varnum": b"\x05\xfd\x01",
            "deep-nesting": nest([0x1C] * 200, b""),
            "truncated-interest": ni[: len(ni) // 2],
        },
        "name": {
            "empty": b"",
            "zero-type": b"\x00\x01a",
            "digest-wrong-length": b"\x01\x05abcde",
            "huge-component": b"\x08\xfe\xff\xff\xff\xff",
            "type-over-65535": b"\xfe\x00\x01\x00\x00\x01a",
            "uri-superscript-type": "/\u00b300=x".encode(),
            "uri-arabic-digit": "/seg=\u0661/\u0661=x".encode(),
            "uri-bad-percent": b"/a%zz/%",
            "uri-dots": b"/./../.../....",
            "periods-only-values": tlv(8, b"") + tlv(8, b".") + tlv(8, b".."),
            "many-components": tlv(8, b"x") * 100,
        },
        "interest": {
            "truncated": ni[:-1],
            "trailing-byte": ni + b"\x00",
            "huge-length": b"\x05\xff" + b"\xff" * 8 + name,
            "name-claims-too-much": tlv(5, tlv(7, name, claim=200)),
            "two-digests": tlv(5, tlv(7, b"\x02\x20" + bytes(32) + b"\x02\x20" + bytes(32))),
            "digest-without-params": tlv(5, tlv(7, name + b"\x02\x20" + bytes(32))),
            "nonce-3-bytes": tlv(5, tlv(7, name) + tlv(0x0A, b"abc")),
            "deep-forwarding-hint": tlv(5, tlv(7, name) + tlv(0x1E, nest([7] * 100, b""))),
            "sig-info-no-type": tlv(5, tlv(7, name) + tlv(0x2C, b"")),
        },
        "data": {
            "truncated": md[:-3],
            "no-signature": tlv(6, tlv(7, name) + tlv(0x15, b"x")),
            "huge-content": tlv(6, tlv(7, name), claim=10) + tlv(0x15, b"", claim=2**32),
            "bad-final-block-id": tlv(6, tlv(7, name) + tlv(0x14, tlv(0x1A, b"\x08\x05a"))
                                      + tlv(0x16, tlv(0x1B, b"\x00")) + tlv(0x17, b"")),
            "keylocator-deep": tlv(6, tlv(7, name) + tlv(0x16, tlv(0x1B, b"\x00")
                                   + tlv(0x1C, nest([0x1C] * 50, b""))) + tlv(0x17, b"")),
            "nonneg-9-bytes": tlv(6, tlv(7, name) + tlv(0x14, tlv(0x19, bytes(9)))
                                  + tlv(0x16, tlv(0x1B, b"\x00")) + tlv(0x17, b"")),
        },
        "notify": {
            "params-truncated": tlv(7, name)[:-1],
            "params-huge-nonce": tlv(7, name) + tlv(0x80, b"", claim=2**64 - 1),
            "params-deep-hint": tlv(0xD3, nest([0xD3] * 60, tlv(7, name))),
            "interest-not-notify": mi,
            "notify-truncated": ni[:-10],
        },
        "lp": {
            "empty-lp": b"\x64\x00",
            "huge-fragment": b"\x64\x05" + b"\x50\xfe\xff\xff\xff\xff",
            "sequence-7-bytes": tlv(0x64, tlv(0x51, bytes(7))),
            "fields-after-fragment": tlv(0x64, tlv(0x50, b"x") + lp_seq),
            "repeated-sequence": tlv(0x64, lp_seq + lp_seq),
            "many-acks": tlv(0x64, tlv(0x0344, bytes(8)) * 40),
            "nack-nested-garbage": tlv(0x64, tlv(0x0320, nest([0x0320] * 40, b""))),
            "pit-token-33": tlv(0x64, tlv(0x62, bytes(33))),
        },
        "lp_frag": {
            "count-huge": records([tlv(0x64, lp_seq + tlv(0x52, b"\x00")
                                       + tlv(0x53, b"\xff" * 8) + tlv(0x50, b"x"))]),
            "index-past-count": records([tlv(0x64, lp_seq + tlv(0x52, b"\x05")
                                             + tlv(0x53, b"\x02") + tlv(0x50, b"x"))]),
            "count-changes": records([
                tlv(0x64, lp_seq + tlv(0x52, b"\x00") + tlv(0x53, b"\x03") + tlv(0x50, b"x")),
                tlv(0x64, tlv(0x51, (6).to_bytes(8, "big")) + tlv(0x52, b"\x01")
                    + tlv(0x53, b"\x04") + tlv(0x50, b"y"))]),
            "empty-fragment": records([tlv(0x64, lp_seq + tlv(0x52, b"\x00")
                                           + tlv(0x53, b"\x02") + tlv(0x50, b""))]),
            "sequence-wraps": records([
                tlv(0x64, tlv(0x51, b"\xff" * 8) + tlv(0x52, b"\x00") + tlv(0x53, b"\x02")
                    + tlv(0x50, b"a")),
                tlv(0x64, tlv(0x51, bytes(8)) + tlv(0x52, b"\x01") + tlv(0x53, b"\x02")
                    + tlv(0x50, b"b"))]),
            "many-partials": records([
                tlv(0x64, tlv(0x51, (i * 10).to_bytes(8, "big")) + tlv(0x52, b"\x00")
                    + tlv(0x53, b"\x02") + tlv(0x50, b"z" * 200)) for i in range(12)], dt=7),
            "truncated-record": b"\x01\x10\x00\x64",
        },
        "framing": {
            "no-delimiters": chunked(b"\x01" * 400, 5),
            "cobs-cut-short": chunked(b"\x00\x09abc\x00", 0),
            "only-zeros": chunked(b"\x00" * 500, 63),
            "bad-crc": chunked(b"\x00\x04abc\x00", 1),
            "one-byte-frame": chunked(b"\x00\x02a\x00", 2),
            "oversize-then-good": chunked(b"\x00" + b"\xff" + b"x" * 254 + b"\x00", 17),
        },
        "sp": {
            "length-u64-max": chunked(b"\xff" * 8, 1),
            "length-over-max": chunked((257).to_bytes(8, "big"), 2),
            "bad-header": chunked(b"\x00SP\x01\x00\x20\x00\x00", 0x81),
            "wrong-peer": chunked(b"\x00SP\x00\x00\x21\x00\x00" + bytes(8), 0x80),
            "zero-length-messages": chunked(bytes(8) * 20, 3),
            "body-cut-short": chunked((200).to_bytes(8, "big") + b"x" * 50, 9),
        },
        "sp_header": {
            "short": b"\x00SP",
            "long": b"\x00SP\x00\x00\x20\x00\x00\x00",
            "bad-magic": b"\x01SP\x00\x00\x20\x00\x00",
            "reserved": b"\x00SP\x00\x00\x21\x00\x01",
            "huge-msg": b"\x00SP\x00\x00\x21\x00\x00" + b"\xff" * 8,
        },
        "cbor": {
            "array-claims-u64": b"\x9b" + b"\xff" * 8,
            "map-claims-u32": b"\xba\xff\xff\xff\xff\x00",
            "bytes-claims-u64": b"\x5b" + b"\xff" * 8 + b"x",
            "nesting-17": b"\x81" * 17 + b"\x00",
            "nesting-1000": b"\x81" * 1000,
            "indefinite": b"\x9f\x01\xff",
            "tag": b"\xc1\x01",
            "bad-utf8": b"\x62\xc3\x28",
            "surrogate": b"\x63\xed\xa0\x80",
            "duplicate-key": b"\xa2\x01\x00\x01\x00",
            "list-key": b"\xa1\x80\x00",
            "half-nan-keys": b"\xa2\xf9\x7e\x00\x01\xfa\x7f\xc0\x00\x00\x02",
            "truncated-float": b"\xfb\x00\x00",
            "simple-24": b"\xf8\x20",
        },
        "dissect": {
            "empty": b"",
            "cache-policy-deep": tlv(0x64, nest([0x0334] * 30, b"")),
            "fragment-in-fragment": tlv(0x64, nest([0x50] * 12, ni)),
            "trailing": ni + b"\x05",
            "unknown-top": tlv(0x99, b"x"),
            "lp-truncated": tlv(0x64, tlv(0x50, ni))[:-4],
        },
        "ndn_stream": {
            "huge-claim": chunked(b"\x05\xff" + b"\xff" * 8, 1),
            "over-max-packet": chunked(tlv(5, b"x" * 600), 4),
            "header-split-everywhere": chunked(b"\x05\xfd\x00\x03abc" * 10, 0),
            "garbage-long": chunked(b"\xfd" * 40, 7),
            "zero-length-elements": chunked(b"\x00\x00" * 100, 2),
        },
        "ndn_control": {
            "empty": b"",
            "no-name": tlv(0x68, tlv(0x6A, b"\x05")),
            "bad-name": tlv(0x68, tlv(7, b"\x00\x01a")),
            "cost-9-bytes": tlv(0x68, tlv(7, name) + tlv(0x6A, bytes(9))),
            "wrong-type": tlv(0x65, tlv(7, name)),
            "command-4-components": name + name,
            "command-bad-params": name + name + tlv(8, b"\x68\xff"),
        },
    }


def main() -> None:
    for target, files in build().items():
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for label, data in files.items():
            (d / ("hand-" + label)).write_bytes(data)
    n = sum(len(f) for f in build().values())
    print("wrote %d hand-made inputs under %s" % (n, CORPUS.relative_to(ROOT)))


if __name__ == "__main__":
    main()
