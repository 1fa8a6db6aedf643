"""Cross-checks of pubmote_wire's NDN codec with python-ndn, both ways (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ndn.encoding import (
    Component,
    InterestParam,
    MetaInfo,
    Name,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
)
from ndn.security import DigestSha256Signer

from pubmote_wire import data, interest, name
from pubmote_wire.signature import DIGEST_SHA256, DigestSigner

SETTINGS = settings(max_examples=300, deadline=None)

_types = st.sampled_from([8, 8, 8, 32, 50, 52, 54, 56, 58, 9, 253, 1000, 65535])


@st.composite
def components(draw: st.DrawFn) -> bytes:
    typ = draw(_types)
    if typ in (50, 52, 54, 56, 58):
        n = draw(st.integers(0, 2**64 - 1))
        return Component.from_number(n, typ)
    value = draw(st.binary(max_size=20))
    return bytes(Component.from_bytes(value, typ))


names = st.lists(components(), max_size=6).map(b"".join)


def _ndn_name(n: bytes) -> list[bytes]:
    return [bytes(c) for c in name.components(n)]


@SETTINGS
@given(names)
def test_name_uri_both_ways(n: bytes) -> None:
    comps = _ndn_name(n)
    assert b"".join(comps) == n
    uri = name.to_uri(n)
    assert name.from_uri(uri) == n
    # python-ndn reads our canonical URI to the same name (it has no "..." rule, so
    # components made only of periods are skipped here).
    if not any(set(bytes(name.component_type_value(c)[1])) <= {0x2E} for c in comps):
        assert b"".join(Name.from_str(uri)) == n
        assert name.from_uri(Name.to_str(comps)) == n


def _key(n: bytes) -> list[tuple[int, int, bytes]]:
    # NDN canonical order from python-ndn's view of the components.
    out = []
    for c in _ndn_name(n):
        v = bytes(Component.get_value(c))
        out.append((Component.get_type(c), len(v), v))
    return out


@SETTINGS
@given(names, names)
def test_canonical_order_and_prefix(a: bytes, b: bytes) -> None:
    ka, kb = _key(a), _key(b)
    assert name.compare(a, b) == (ka > kb) - (ka < kb)
    assert name.is_prefix(a, b) == Name.is_prefix(_ndn_name(a), _ndn_name(b))
    assert name.is_prefix(a, a + b)


interest_args = st.fixed_dictionaries(
    {},
    optional={
        "can_be_prefix": st.booleans(),
        "must_be_fresh": st.booleans(),
        "nonce": st.integers(0, 2**32 - 1),
        "lifetime_ms": st.integers(0, 2**40),
        "hop_limit": st.integers(0, 255),
        "forwarding_hint": st.lists(names.filter(bool), min_size=1, max_size=2),
        "app_params": st.binary(max_size=40),
    },
)


@SETTINGS
@given(names.filter(bool), interest_args, st.booleans())
def test_interest_ours_to_python_ndn(n: bytes, kw: dict, signed: bool) -> None:
    if signed:
        kw["signer"] = DigestSigner()
    w = interest.encode(n, **kw)
    nm, p, ap, sp = parse_interest(w)
    assert b"".join(nm[: name.count(n)]) == n
    assert p.can_be_prefix == kw.get("can_be_prefix", False)
    assert p.must_be_fresh == kw.get("must_be_fresh", False)
    assert p.nonce == kw.get("nonce")
    assert p.lifetime == kw.get("lifetime_ms")
    assert p.hop_limit == kw.get("hop_limit")
    assert [b"".join(f) for f in p.forwarding_hint] == kw.get("forwarding_hint", [])
    if "app_params" in kw or signed:
        assert bytes(ap) == kw.get("app_params", b"")
        assert Component.get_type(nm[-1]) == Component.TYPE_PARAMETERS_SHA256
    if signed:
        assert sp.signature_info.signature_type == DIGEST_SHA256
        from hashlib import sha256

        h = sha256()
        for part in sp.signature_covered_part:
            h.update(part)
        assert h.digest() == bytes(sp.signature_value_buf)


@SETTINGS
@given(names.filter(bool), interest_args, st.booleans())
def test_interest_python_ndn_to_ours(n: bytes, kw: dict, signed: bool) -> None:
    p = InterestParam(
        can_be_prefix=kw.get("can_be_prefix", False),
        must_be_fresh=kw.get("must_be_fresh", False),
        nonce=kw.get("nonce"),
        lifetime=kw.get("lifetime_ms"),
        hop_limit=kw.get("hop_limit"),
        forwarding_hint=[_ndn_name(f) for f in kw.get("forwarding_hint", [])],
    )
    signer = DigestSha256Signer() if signed else None
    w = make_interest(_ndn_name(n), p, kw.get("app_params"), signer=signer)
    i = interest.decode_interest(w)
    assert bytes(i.name[: len(n)]) == n
    assert (i.can_be_prefix, i.must_be_fresh) == (p.can_be_prefix, p.must_be_fresh)
    assert (i.nonce, i.lifetime_ms, i.hop_limit) == (p.nonce, p.lifetime, p.hop_limit)
    assert [bytes(f) for f in (i.forwarding_hint or [])] == kw.get("forwarding_hint", [])
    if kw.get("app_params") is not None or signed:
        assert i.params_digest_ok and bytes(i.app_params) == kw.get("app_params", b"")
    if signed:
        assert i.sig_type == DIGEST_SHA256 and interest.verify_interest(i, w)
    # Our encoder, given the same fields, writes the same bytes.
    kw2 = dict(kw)
    if signed:
        kw2["signer"] = DigestSigner()
    if not kw2.get("forwarding_hint"):
        kw2.pop("forwarding_hint", None)
    assert interest.encode(n, **kw2) == bytes(w)


data_args = st.fixed_dictionaries(
    {},
    optional={
        "content_type": st.integers(0, 2**32),
        "freshness_ms": st.integers(0, 2**40),
        "final_block_id": components(),
    },
)


@SETTINGS
@given(names, st.one_of(st.none(), st.binary(max_size=300)), data_args)
def test_data_both_ways(n: bytes, content: bytes | None, kw: dict) -> None:
    w = data.encode(n, content, **kw)
    nm, meta, c, sp = parse_data(w)
    assert b"".join(nm) == n
    assert (None if c is None else bytes(c)) == content
    if kw:
        assert meta.content_type == kw.get("content_type")
        assert meta.freshness_period == kw.get("freshness_ms")
        fbi = kw.get("final_block_id")
        assert (None if meta.final_block_id is None else bytes(meta.final_block_id)) == fbi
    assert sp.signature_info.signature_type == DIGEST_SHA256
    # python-ndn's encoding of the same fields: identical bytes, and we parse it back.
    mi = MetaInfo(content_type=kw.get("content_type"), freshness_period=kw.get("freshness_ms"),
                  final_block_id=kw.get("final_block_id"))
    theirs = make_data(_ndn_name(n), mi if kw else None, content, signer=DigestSha256Signer())
    assert bytes(theirs) == w
    d = data.decode_data(theirs)
    assert bytes(d.name) == n and data.verify_data(d, theirs)
    assert d.content_type == kw.get("content_type") and d.freshness_ms == kw.get("freshness_ms")
    assert (None if d.content is None else bytes(d.content)) == content
