# NDN Interest packets (v0.3), what a board uses: encode into a caller's buffer
# (encode_parts), decode into memoryview fields, ParametersSha256DigestComponent and signed
# Interests (DigestSha256 / HmacWithSha256). interest.py is the whole API: this and what a
# board never calls (encode_interest and its conveniences, verify_interest), which would be
# heap on a board (each function object, its defaults, its module global).
from struct import pack_into

from . import tlv
from .compat import const, sha256, urandom
from .errors import DecodeError, EncodeError
from .namewire import name_len, put_name, walk
from .signature import parse_info

INTEREST = const(0x05)  # the packet's TLV type
_NAME = const(0x07)
_FORWARDING_HINT = const(0x1E)
_APP_PARAMS = const(0x24)
# Known elements in their v0.3 order (Name 07, CanBePrefix 21, MustBeFresh 12,
# ForwardingHint 1e, Nonce 0a, InterestLifetime 0c, HopLimit 22, ApplicationParameters 24,
# InterestSignatureInfo 2c, InterestSignatureValue 2e); _RANK[type] - 1 is the place. A
# const bytes literal: no allocation, no module global (frozen, it stays in flash)
_RANK = const(
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x05\x00\x06\x00\x00\x00"
    b"\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00"
    b"\x00\x02\x07\x00\x08\x00\x00\x00\x00\x00\x00\x00\x09\x00\x0a"
)


def _strip_digest(name):
    # The name without its ParametersSha256Digest component(s); the substring test is
    # cheap and nearly always false, so the walk (and any copy) is rare.
    if type(name) is not bytes:
        name = bytes(name)
    while b"\x02\x20" in name:
        dp = walk(name, 0, len(name), False)
        if dp < 0:
            break
        name = name[:dp] + name[dp + 34 :]
    return name


# Random Interest nonces are written as 4 bytes from a pool refilled 32 bytes at a time:
# no int (above 2**30 it would be a heap object on a 32-bit board) and few allocations.
# Its last byte is the next unused one's index (one object, one module global: on a board
# each global is heap, and this module's table is at a size's edge)
_POOL = bytearray(33)
_POOL[32] = 32


def _rand4(buf, p):
    k = _POOL[32]
    if k >= 32:
        _POOL[0:32] = urandom(32)
        k = 0
    buf[p] = _POOL[k]
    buf[p + 1] = _POOL[k + 1]
    buf[p + 2] = _POOL[k + 2]
    buf[p + 3] = _POOL[k + 3]
    _POOL[32] = k + 4


def _clear(i):
    i.name = i.forwarding_hint = i.nonce = i.lifetime_ms = i.hop_limit = None
    i.app_params = i.sig_type = i.sig_key_name = i.sig_nonce = i.sig_time_ms = None
    i.sig_seq = i.sig_value = None
    i.can_be_prefix = i.must_be_fresh = i.params_digest_ok = False
    i.name_start = i.name_end = i.digest_at = i.params_at = i.signed_end = -1


# A decoded Interest. Fields are memoryview slices of the input; nonce is an int. Where
# its parts are in the input (offsets, -1 if absent), for checking its signature and digest
# in place: name_start and name_end (the Name's value), digest_at (its
# ParametersSha256Digest component), params_at (the ApplicationParameters element),
# signed_end (the end of InterestSignatureInfo: what the signature covers ends there).
# reader and reader2: the TLV readers each decode into it reuses (no allocation per packet;
# notify.py parses the notify parameters with them once the Interest is decoded).
class Interest:

    def __init__(self):
        _clear(self)
        self.reader = tlv.TLVReader(b"")
        self.reader2 = tlv.TLVReader(b"")

    # [(start, end)] of the input the signature covers, or None if unsigned: the name
    # around the params digest (a signed Interest always has one), then parameters..info.
    @property
    def signed_regions(self):
        if self.signed_end < 0:
            return None
        return [(self.name_start, self.digest_at), (self.digest_at + 34, self.name_end),
                (self.params_at, self.signed_end)]


# The Interest's TLV-LENGTH for _encode's arguments (params_len -1: no
# ApplicationParameters).
def _value_len(name_len, can_be_prefix, must_be_fresh, forwarding_hint, nonce, lifetime_ms,
               hop_limit, params_len, signer, sig_nonce, sig_time_ms, sig_seq):
    vl = tlv.tl_size(_NAME, name_len)
    if can_be_prefix:
        vl += 2
    if must_be_fresh:
        vl += 2
    if forwarding_hint:
        vl += tlv.tl_size(_FORWARDING_HINT, _fh_len(forwarding_hint))
    if nonce is not None:
        if nonce < -1 or nonce > 0xFFFFFFFF:  # -1: a random nonce (internal)
            raise EncodeError("too large")
        vl += 6
    if lifetime_ms is not None:
        vl += tlv.nonneg_tlv_size(0x0C, lifetime_ms)
    if hop_limit is not None:
        if hop_limit < 0 or hop_limit > 255:
            raise EncodeError("too large")
        vl += 3
    if params_len >= 0:
        vl += tlv.tl_size(_APP_PARAMS, params_len)
    if signer is not None:
        vl += signer.info_size(True, sig_nonce, sig_time_ms, sig_seq) + 2 + signer.sig_len
    return vl


def _fh_len(fh):
    t = type(fh)
    if t is bytes or t is bytearray or t is memoryview:  # one Name, no list (internal)
        return tlv.tl_size(_NAME, len(fh))
    n = 0
    for f in fh:
        n += tlv.tl_size(_NAME, len(f))
    return n


def encode_parts(buf, off, name, n2=None, n3=None, n4=None, *, can_be_prefix=False,
                 must_be_fresh=False, forwarding_hint=None, nonce=None, lifetime_ms=None,
                 hop_limit=None, app_params=None, signer=None, sig_nonce=None, sig_time_ms=None,
                 sig_seq=None, params_len=-1, fill=None, fill_a=None, fill_b=None, fill_c=None,
                 fill_d=None):
    # The codec's Interest writer (encode_interest, and control.py's and notify.py's
    # packets, call it). Sizes by arithmetic, then fields written in place (buf None:
    # return the size only). The name is name + n2 + n3 (+ generic n4), see put_name, so
    # notify names need no concatenated copy. Keyword-only past the name: a call says what
    # each value is, and on MicroPython matching a keyword costs no allocation. With fill,
    # the ApplicationParameters are params_len bytes that fill(buf, off, fill_a, fill_b,
    # fill_c, fill_d) writes, so the notify parameters need no bytes object of their own. A
    # nonce of -1 is a random one.
    al = _params_len(fill, params_len, app_params, signer)
    if al >= 0:
        name = _strip_digest(name)
    nl0 = name_len(name, n2, n3, n4)
    nl = nl0 + 34 if al >= 0 else nl0
    vl = _value_len(nl, can_be_prefix, must_be_fresh, forwarding_hint, nonce, lifetime_ms,
                    hop_limit, al, signer, sig_nonce, sig_time_ms, sig_seq)
    total = tlv.tl_size(INTEREST, vl)
    if buf is None:
        return total
    if off + total > len(buf):
        raise EncodeError("buffer too small")
    p = off + tlv.write_tl(buf, off, INTEREST, vl)
    p += tlv.write_tl(buf, p, _NAME, nl)
    ns = p
    p = ne = put_name(buf, p, name, n2, n3, n4)
    if al >= 0:
        buf[p] = 2
        buf[p + 1] = 32
        p += 34
    if can_be_prefix:
        p += tlv.write_tl(buf, p, 0x21, 0)
    if must_be_fresh:
        p += tlv.write_tl(buf, p, 0x12, 0)
    if forwarding_hint:
        p = _put_forwarding_hint(buf, p, forwarding_hint)
    if nonce is not None:
        if nonce < 0:
            buf[p] = 0x0A
            buf[p + 1] = 4
            _rand4(buf, p + 2)
        else:
            pack_into(">BBI", buf, p, 0x0A, 4, nonce)
        p += 6
    if lifetime_ms is not None:
        p += tlv.write_nonneg_tlv(buf, p, 0x0C, lifetime_ms)
    if hop_limit is not None:
        pack_into("BBB", buf, p, 0x22, 1, hop_limit)
        p += 3
    if al >= 0:
        a0 = p
        p = _put_params(buf, p, al, app_params, fill, fill_a, fill_b, fill_c, fill_d)
        p = _sign_and_digest(buf, p, ns, ne, a0, signer, sig_nonce, sig_time_ms, sig_seq)
    return p - off


def _params_len(fill, params_len, app_params, signer):
    # the ApplicationParameters' length, -1 for none: a signed Interest has them (empty)
    if fill is not None:
        return params_len
    if app_params is not None:
        return len(app_params)
    return 0 if signer is not None else -1


def _put_forwarding_hint(buf, p, fh):
    # the ForwardingHint: one Name, or a list of them
    p += tlv.write_tl(buf, p, _FORWARDING_HINT, _fh_len(fh))
    t = type(fh)
    if t is bytes or t is bytearray or t is memoryview:
        return p + tlv.write_tlv(buf, p, _NAME, fh)
    for f in fh:
        p += tlv.write_tlv(buf, p, _NAME, f)
    return p


def _put_params(buf, p, al, app_params, fill, fill_a, fill_b, fill_c, fill_d):
    # the ApplicationParameters: app_params, or al bytes that fill writes in place
    p += tlv.write_tl(buf, p, _APP_PARAMS, al)
    if fill is not None:
        fill(buf, p, fill_a, fill_b, fill_c, fill_d)
    elif al:
        buf[p : p + al] = app_params
    return p + al


def _sign_and_digest(buf, p, ns, ne, a0, signer, sig_nonce, sig_time_ms, sig_seq):
    # The signature (if any) after the ApplicationParameters (at a0), then the digest
    # component's value (its TL at ne, written already), which covers ApplicationParameters
    # through the end of the Interest
    mv = memoryview(buf)
    if signer is not None:
        p += signer.write_info(buf, p, 0x2C, sig_nonce, sig_time_ms, sig_seq)
        sig = signer.sign2(mv, ns, ne, a0, p)
        p += tlv.write_tlv(buf, p, 0x2E, sig)
    buf[ne + 2 : ne + 34] = sha256(mv[a0:p]).digest()
    return p


# Parse one Interest TLV that fills buf exactly; return an Interest (into, if given).
def decode_interest(buf, into=None):
    i = into if into is not None else Interest()
    mv = memoryview(buf)
    r = i.reader
    r.reset(buf)
    if not r.next() or r.typ != INTEREST or r.vend != len(mv):
        raise DecodeError("bad Interest")
    _clear(i)
    r.reset(buf, r.vstart, r.vend)
    rank = -1  # place of the last known element; later out-of-order ones count as unknown
    nxt = r.pos
    while r.next():
        s = nxt
        t = r.typ
        vs = r.vstart
        ve = nxt = r.vend
        k = _RANK[t] - 1 if t < 0x2F else -1
        if rank < 0:
            if k != 0:
                raise DecodeError("bad Interest")
            i.digest_at = walk(buf, vs, ve, True)
            i.name = mv[vs:ve]
            i.name_start = vs
            i.name_end = ve
        elif k <= rank:  # unknown, repeated or out of order
            if tlv.is_critical(t):
                raise DecodeError("unknown critical TLV")
            continue
        elif k == 4:
            if ve - vs != 4:
                raise DecodeError("bad Nonce")
            i.nonce = r.nonneg()
        elif k == 5:
            i.lifetime_ms = r.nonneg()
        elif k == 7:
            i.app_params = mv[vs:ve]
            i.params_at = s
        elif k == 8:
            parse_info(i, i.reader2, buf, vs, ve, True)
            i.signed_end = ve
        elif k == 9:
            i.sig_value = mv[vs:ve]
        else:
            _rare(i, k, buf, mv, vs, ve)
        rank = k
    if rank < 0:
        raise DecodeError("bad Interest")
    return _check(i, buf, mv)


# CanBePrefix, MustBeFresh, ForwardingHint, HopLimit: kept apart to keep functions small
# (MicroPython compiles each function's bytecode into one block of the heap).
def _rare(i, k, buf, mv, vs, ve):
    if k == 1:
        i.can_be_prefix = True
    elif k == 2:
        i.must_be_fresh = True
    elif k == 3:
        q = i.reader2
        q.reset(buf, vs, ve)
        i.forwarding_hint = fh = []
        while q.next():
            if q.typ == _NAME:
                walk(buf, q.vstart, q.vend, False)
                fh.append(mv[q.vstart : q.vend])
            elif tlv.is_critical(q.typ):
                raise DecodeError("unknown critical TLV")
    else:
        if ve - vs != 1:
            raise DecodeError("bad HopLimit")
        i.hop_limit = buf[vs]


def _check(i, buf, mv):
    # The params digest covers ApplicationParameters to the end; a signature needs both.
    a0 = i.params_at
    dp = i.digest_at
    if a0 >= 0:
        if dp < 0:
            raise DecodeError("bad ParametersSha256Digest")
        d = sha256(mv[a0:]).digest()
        k = 0
        while k < 32:  # compared in place: no slice of the input
            if d[k] != buf[dp + 2 + k]:
                raise DecodeError("bad ParametersSha256Digest")
            k += 1
        i.params_digest_ok = True
    elif dp >= 0:
        raise DecodeError("bad ParametersSha256Digest")
    if (i.signed_end >= 0) != (i.sig_value is not None) or (i.signed_end >= 0 and a0 < 0):
        raise DecodeError("bad Interest signature")
    return i
