# Packet dissector: one NDN packet or LpPacket -> a canonical JSON tree, identical on
# CPython and MicroPython (keys in a fixed order, our own serialiser: MicroPython's json
# has no sort_keys or indent). Run: micropython -m pubmote_wire.dissect HEX
import binascii

from . import lp
from . import name as _name
from .compat import const, sha256
from .data import DATA, decode_data
from .errors import DecodeError
from .interest import INTEREST, decode_interest
from .signature import DIGEST_SHA256, HMAC_SHA256
from .tlv import TLVReader, read_nonneg
from .verify import equal

_NAMES = {
    0x05: "Interest", 0x06: "Data", 0x07: "Name", 0x21: "CanBePrefix", 0x12: "MustBeFresh",
    0x1E: "ForwardingHint", 0x0A: "Nonce", 0x0C: "InterestLifetime", 0x22: "HopLimit",
    0x24: "ApplicationParameters", 0x2C: "InterestSignatureInfo",
    0x2E: "InterestSignatureValue", 0x14: "MetaInfo", 0x15: "Content",
    0x16: "SignatureInfo", 0x17: "SignatureValue", 0x18: "ContentType",
    0x19: "FreshnessPeriod", 0x1A: "FinalBlockId", 0x1B: "SignatureType",
    0x1C: "KeyLocator", 0x1D: "KeyDigest", 0x26: "SignatureNonce", 0x28: "SignatureTime",
    0x2A: "SignatureSeqNum", 0x64: "LpPacket", 0x50: "Fragment", 0x51: "Sequence",
    0x52: "FragIndex", 0x53: "FragCount", 0x62: "PitToken", 0x0320: "Nack",
    0x0321: "NackReason", 0x0330: "NextHopFaceId", 0x0331: "IncomingFaceId",
    0x0334: "CachePolicy", 0x0340: "CongestionMark", 0x0344: "Ack", 0x0348: "TxSequence",
    0x034C: "NonDiscovery", 0x0350: "PrefixAnnouncement",
}
# elements whose value is a NonNegativeInteger
_NUMBERS = (0x0C, 0x22, 0x18, 0x19, 0x1B, 0x28, 0x2A, 0x52, 0x53, 0x0321, 0x0330, 0x0331,
            0x0340, 0x0344, 0x0348, 0x51)
# elements that hold other elements
_NESTED = (0x14, 0x16, 0x2C, 0x1C, 0x0320, 0x1E, 0x0334)
_SIG_TYPES = {0: "DigestSha256", 1: "SignatureSha256WithRsa", 3: "SignatureSha256WithEcdsa",
              4: "SignatureHmacWithSha256", 5: "SignatureEd25519"}
_NACK_REASONS = {0: "None", 50: "Congestion", 100: "Duplicate", 150: "NoRoute"}
_MAX_DEPTH = const(8)
# the elements shown other than by their number or hex (their names are in _NAMES)
_T_NAME = const(0x07)
_T_MUST_BE_FRESH = const(0x12)
_T_CAN_BE_PREFIX = const(0x21)
_T_SIGNATURE_TYPE = const(0x1B)
_T_FRAGMENT = const(0x50)
_T_NACK_REASON = const(0x0321)


def _hex(b):
    return binascii.hexlify(bytes(b)).decode()


def _elements(buf, start, end, depth):
    if depth > _MAX_DEPTH:
        raise DecodeError("nesting too deep")
    out = []
    r = TLVReader(buf, start, end)
    while r.next():
        out.append(_element(buf, r.typ, r.vstart, r.vend, depth))
    return out


def _element(buf, typ, vs, ve, depth):
    label = _NAMES.get(typ)
    node = [("type", label if label is not None else typ), ("tlv", typ), ("length", ve - vs)]
    if typ == _T_NAME:
        node.append(("uri", _name.to_uri(bytes(buf[vs:ve]))))
    elif typ in _NUMBERS and ve - vs in (1, 2, 4, 8):
        v = read_nonneg(buf, vs, ve - vs)
        node.append(("value", v))
        if typ == _T_SIGNATURE_TYPE:
            node.append(("name", _SIG_TYPES.get(v, "unknown")))
        elif typ == _T_NACK_REASON:
            node.append(("reason", _NACK_REASONS.get(v, "unknown")))
    elif typ in _NESTED:
        node.append(("elements", _elements(buf, vs, ve, depth + 1)))
    elif typ == _T_FRAGMENT:
        node.append(("packet", _packet(buf, vs, ve, depth + 1)))
    elif typ == _T_MUST_BE_FRESH or typ == _T_CAN_BE_PREFIX:
        pass  # empty flags
    else:
        node.append(("hex", _hex(buf[vs:ve])))
    return node


def _packet(buf, start, end, depth):
    if start >= end:
        raise DecodeError("empty input")
    r = TLVReader(buf, start, end)
    r.next()
    if r.pos != end:
        raise DecodeError("trailing bytes after the packet")
    typ = r.typ
    if typ not in (INTEREST, DATA, lp.LP_PACKET):
        raise DecodeError("not an Interest, Data or LpPacket (type %d)" % typ)
    pkt = bytes(buf[start:end])
    # the codec's own parser validates the packet as a whole (params digest, order, ...)
    if typ == INTEREST:
        obj = decode_interest(pkt)
    elif typ == DATA:
        obj = decode_data(pkt)
    else:
        obj = lp.decode_lp(pkt)
    node = [("packet", _NAMES[typ]), ("length", end - start),
            ("elements", _elements(pkt, r.vstart - start, len(pkt), depth))]
    if typ == INTEREST:
        _notify(node, obj)
    if typ != lp.LP_PACKET:
        _signature(node, obj, pkt)
    return node


def _notify(node, obj):
    if obj.app_params is None:
        return
    try:
        from .notify import (
            decode_notify_params,
            parse_notify_interest,  # noqa: F401 (same check as the bridge)
        )

        publisher, nonce, fwd = decode_notify_params(obj.app_params)
    except DecodeError:
        return
    if publisher is None or nonce is None:
        return
    n = [("publisher", _name.to_uri(bytes(publisher))), ("nonce", _hex(nonce))]
    if fwd is not None:
        n.append(("fwd_hint", _name.to_uri(bytes(fwd))))
    node.append(("notify", n))


def _signature(node, obj, pkt):
    if obj.sig_type is None:
        return
    st = obj.sig_type
    sig = [("type", _SIG_TYPES.get(st, "unknown")), ("value", st)]
    if st == DIGEST_SHA256 and obj.sig_value is not None:
        h = sha256()
        mv = memoryview(pkt)
        for s, e in obj.signed_regions:
            h.update(mv[s:e])
        sig.append(("valid", equal(h.digest(), obj.sig_value)))
    elif st == HMAC_SHA256:
        sig.append(("valid", None))
        sig.append(("note", "needs the board's key"))
    node.append(("signature", sig))


def dissect(pkt):
    """The tree of one packet as nested lists of (key, value) pairs; DecodeError if bad."""
    return _packet(pkt, 0, len(pkt), 0)


# ---- canonical JSON --------------------------------------------------------------------

_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _str(s):
    out = []
    for ch in s:
        e = _ESC.get(ch)
        if e is not None:
            out.append(e)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _is_obj(v):
    return isinstance(v, list) and len(v) > 0 and isinstance(v[0], tuple)


def to_json(v, indent=0):
    """Serialise a tree: lists of pairs are objects, other lists arrays."""
    pad = "  " * (indent + 1)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _str(v)
    if _is_obj(v):
        items = [pad + _str(k) + ": " + to_json(x, indent + 1) for k, x in v]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(v, list):
        if not v:
            return "[]"
        items = [pad + to_json(x, indent + 1) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    raise TypeError("cannot serialise %r" % (v,))


def dissect_hex(text):
    """Hex text (whitespace allowed) -> (output, ok): JSON, or a one-line error."""
    try:
        h = "".join(text.split())
        try:
            pkt = binascii.unhexlify(h)
        except (ValueError, TypeError):
            raise DecodeError("input is not hex") from None
        return to_json(dissect(pkt)), True
    except DecodeError as e:
        return "error: malformed packet: %s" % (e.args[0] if e.args else "DecodeError"), False


def main(argv):
    """argv[1:] is hex, possibly split over several arguments, or "-" for stdin (the
    pybind build of the unix port fails on one argument longer than 256 bytes)."""
    import sys

    if len(argv) < 2:
        print("usage: dissect HEX [HEX ...]   (or - to read hex from stdin)")
        return 2
    text = sys.stdin.read() if argv[1] == "-" else " ".join(argv[1:])
    out, ok = dissect_hex(text)
    print(out)
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    _rc = main(sys.argv)
    if _rc:
        sys.exit(_rc)
