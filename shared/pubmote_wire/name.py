# NDN Names (packet format v0.3, naming conventions rev3): components, URIs, order.
# A Name is the TLV-VALUE of the Name element: the concatenation of its component TLVs,
# held as bytes (or any bytes-like). Flat bytes mean no per-component objects when
# encoding, and python-ndn's b"".join(name) gives the same bytes.
# On a board each module global is heap (each function too, frozen or not): its tables are
# consts (no global), what only an error path uses is imported there, and what a board's
# node never calls (the typed-component builders, validate, size, write) is in name_more.py,
# loaded at its first use through this module's __getattr__ (name.segment(3) works as ever).
from .compat import const
from .errors import DecodeError
from .namewire import comp_end, component, number_component
from .tlv import read_varnum

_GENERIC = const(0x08)
_MAX_TYPE = const(0xFFFF)  # component types are 1..65535
# Typed components with a URI form: (type, prefix, is-a-number); others print as "<type>=".
_ALT = const(((0x32, "seg", 1), (0x34, "off", 1), (0x36, "v", 1), (0x38, "t", 1),
              (0x3A, "seq", 1), (0x01, "sha256digest", 0), (0x02, "params-sha256", 0)))
# RFC 3986 unreserved characters stay as they are in a URI; the rest are %XX.
_KEEP = const(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


# A GenericNameComponent; a str value is UTF-8 encoded.
def generic(value):
    if isinstance(value, str):
        value = value.encode()
    return component(_GENERIC, value)


def __getattr__(attr):
    # the rest of the API (name_more.py), loaded when first asked for
    from . import name_more

    try:
        return getattr(name_more, attr)
    except AttributeError:
        raise AttributeError(attr) from None


# The components of name as memoryviews of whole component TLVs.
def components(name):
    mv = memoryview(name)
    out = []
    p = 0
    while p < len(mv):
        s = p
        p = comp_end(mv, p, len(mv))
        out.append(mv[s:p])
    return out


def count(name):
    return len(components(name))


# (type, value memoryview) of one component TLV.
def component_type_value(comp):
    mv = memoryview(comp)
    if comp_end(mv, 0, len(mv)) != len(mv):
        raise DecodeError("bad name component")
    t, k = read_varnum(mv, 0)
    return t, mv[k + read_varnum(mv, k)[1] :]


# True if name a is a component-aligned prefix of name b.
def is_prefix(a, b):
    n = len(a)
    if n > len(b) or bytes(memoryview(b)[:n]) != bytes(a):
        return False
    p = 0
    while p < n:  # a must end on a component boundary of b
        p = comp_end(b, p, len(b))
    return p == n


# NDN canonical order of two names: -1, 0 or 1 (type, then length, then bytes).
def compare(a, b):
    ca = components(a)
    cb = components(b)
    for i in range(min(len(ca), len(cb))):
        ta, va = component_type_value(ca[i])
        tb, vb = component_type_value(cb[i])
        x = (ta, len(va), bytes(va))
        y = (tb, len(vb), bytes(vb))
        if x != y:
            return -1 if x < y else 1
    return (len(ca) > len(cb)) - (len(ca) < len(cb))


def _escape(v):
    out = []
    for c in v:
        out.append(chr(c) if c in _KEEP else "%%%02X" % c)
    s = "".join(out)
    if s.strip(".") == "":  # only periods (or empty): add three so it is not "." or ".."
        s += "..."
    return s


# Canonical NDN URI of name ("/" for the empty name).
def to_uri(name):
    out = []
    for c in components(name):
        t, v = component_type_value(c)
        s = None
        for typ, key, num in _ALT:
            if t == typ:
                if not num:
                    s = key + "=" + "".join("%02x" % x for x in v)
                elif len(v) in (1, 2, 4, 8):
                    s = key + "=" + str(int.from_bytes(bytes(v), "big"))
        if s is None:
            s = _escape(v) if t == _GENERIC else "%d=%s" % (t, _escape(v))
        out.append(s)
    return "/" + "/".join(out)


def _unescape(s):
    b = s.encode()
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i] == 0x25:  # '%'
            h = b[i + 1 : i + 3]
            if len(h) != 2 or h.strip(b"0123456789abcdefABCDEF"):
                raise DecodeError("bad URI")
            out.append(int(h, 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    if out.strip(b".") == b"":  # only periods: "." and ".." are not components
        if len(out) < 3:
            raise DecodeError("bad name component")
        out = out[3:]
    return bytes(out)


# ASCII digits only: CPython's str.isdigit() is also true for "³" (which int() rejects) and
# "١" (which it reads), MicroPython's is not; both must parse a URI the same way.
def _digits(s):
    if not s:
        return False
    for c in s:
        if c < "0" or c > "9":
            return False
    return True


def _int(s, limit):
    if not _digits(s) or len(s) > 20 or int(s) > limit:
        raise DecodeError("bad number")
    return int(s)


def _from_uri_component(s):
    eq = s.find("=")
    key = s[:eq]
    val = s[eq + 1 :]
    for typ, k, num in _ALT:
        if eq > 0 and key == k:
            if num:
                return number_component(typ, _int(val, 0xFFFFFFFFFFFFFFFF))
            v = val.encode()
            if len(v) != 64 or v.strip(b"0123456789abcdefABCDEF"):
                raise DecodeError("bad digest")
            return bytes((typ, 32)) + bytes(int(v[i : i + 2], 16) for i in range(0, 64, 2))
    if eq > 0 and _digits(key):
        t = _int(key, _MAX_TYPE)
        if t == 0:
            raise DecodeError("bad name component")
        c = component(t, _unescape(val))
        comp_end(c, 0, len(c))  # digests must be 32 bytes
        return c
    return component(_GENERIC, _unescape(s))


# Parse an NDN URI ("/a/b", "ndn:/a", "seg=3", "sha256digest=..") into a Name.
def from_uri(uri):
    if not isinstance(uri, str):
        raise DecodeError("bad URI")
    s = uri.strip()
    if s.startswith("ndn:"):
        s = s[4:]
        if s.startswith("//"):  # ndn://authority/...: the authority is ignored
            cut = s.find("/", 2)
            s = s[cut:] if cut > 0 else ""
    if s.startswith("/"):
        s = s[1:]
    if s.endswith("/"):
        s = s[:-1]
    if not s:
        return b""
    out = []
    for part in s.split("/"):
        if not part:
            raise DecodeError("bad name component")
        out.append(_from_uri_component(part))
    return b"".join(out)
