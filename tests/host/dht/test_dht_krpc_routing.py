"""KRPC messages (queries, responses, errors, compact info, transactions) and the BEP 5
routing table (k-buckets, XOR distance, splitting; BEP 50's K=1 table with a home bucket
and sibling of 8)."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubmote.dht import bencode, krpc
from pubmote.dht.krpc import KrpcError
from pubmote.dht.routing import (
    RoutingTable,
    common_prefix_bits,
    distance,
)

NID = b"N" * 20


def test_query_response_error_round_trip() -> None:
    q = krpc.encode_query(b"aa", b"ping", {b"id": NID})
    assert q == b"d1:ad2:id20:" + NID + b"e1:q4:ping1:t2:aa1:y1:qe"  # BEP 5's example
    m = krpc.parse(q)
    assert (m.kind, m.method, m.tid, m.sender_id, m.topic) == (b"q", b"ping", b"aa", NID, None)
    r = krpc.parse(krpc.encode_response(b"aa", {b"id": NID}, topic=b"T" * 20))
    assert r.kind == b"r" and r.topic == b"T" * 20 and r.sender_id == NID
    e = krpc.parse(krpc.encode_error(b"aa", 201, "A Generic Error Ocurred"))
    assert e.error() == (201, "A Generic Error Ocurred")
    assert krpc.encode_error(b"aa", 201, "A Generic Error Ocurred") == (
        b"d1:eli201e23:A Generic Error Ocurrede1:t2:aa1:y1:ee")  # BEP 5's example


BAD = [
    (b"garbage", None), (b"le", None), (b"d1:y1:qe", None), (b"d1:t2:aae", b"aa"),
    (b"d1:t2:aa1:y1:qe", b"aa"),  # no q/a
    (b"d1:ad2:id3:abce1:q4:ping1:t2:aa1:y1:qe", b"aa"),  # short id
    (b"d1:t2:aa1:y1:re", b"aa"),  # response without r
    (b"d1:c3:abc1:t2:aa1:y1:re", b"aa"),  # c not 20 bytes
    (b"d1:t17:" + b"x" * 17 + b"1:y1:ee", None),  # transaction id too long to echo
]


@pytest.mark.parametrize(("wire", "tid"), BAD)
def test_malformed_messages(wire: bytes, tid: bytes | None) -> None:
    with pytest.raises(KrpcError) as e:
        krpc.parse(wire)
    assert e.value.code == krpc.PROTOCOL_ERROR and e.value.tid == tid


@settings(max_examples=800, deadline=None)
@given(st.binary(max_size=300))
def test_any_datagram_parses_or_is_a_krpc_error(data: bytes) -> None:
    try:
        krpc.parse(data)
    except KrpcError:
        pass


def test_compact_info() -> None:
    nodes = [(b"a" * 20, ("10.1.2.3", 6881)), (b"b" * 20, ("127.0.0.1", 1))]
    wire = krpc.compact_nodes(nodes)
    assert len(wire) == 52 and krpc.parse_nodes(wire) == nodes
    assert krpc.compact_peer(("1.2.3.4", 0x1AE1)) == b"\x01\x02\x03\x04\x1a\xe1"
    for bad in (b"x" * 25, 5, None):
        with pytest.raises(KrpcError):
            krpc.parse_nodes(bad)
    assert krpc.parse_nodes(b"a" * 20 + b"\x01\x02\x03\x04\x00\x00") == []  # port 0


def test_transactions_bounded_and_keyed_by_topic() -> None:
    async def run() -> None:
        t = krpc.Transactions(limit=3)
        tid1, f1 = t.open(("1.1.1.1", 1), None)
        tid2, f2 = t.open(("1.1.1.1", 1), b"T" * 20)
        t.open(("1.1.1.1", 1), None)
        with pytest.raises(KrpcError):
            t.open(("1.1.1.1", 1), None)
        assert t.counters["full"] == 1
        ans = krpc.parse(krpc.encode_response(tid1, {b"id": NID}))
        assert not t.resolve(ans, ("6.6.6.6", 1))  # from elsewhere: a spoof, ignored
        assert t.resolve(ans, ("1.1.1.1", 1)) and f1.result() is ans
        # the same tid on another topic is another transaction
        topical = krpc.parse(krpc.encode_response(tid2, {b"id": NID}))
        assert not t.resolve(topical, ("1.1.1.1", 1))
        t.cancel_all()
        assert f2.cancelled() and len(t) == 0

    asyncio.run(run())


def test_distance_and_prefix() -> None:
    a = bytes(20)
    b = bytes(19) + b"\x01"
    assert distance(a, b) == 1 and common_prefix_bits(a, b) == 159
    assert common_prefix_bits(a, b"\x80" + bytes(19)) == 0
    assert common_prefix_bits(a, a) == 160


def test_table_splits_home_bucket_and_bounds_the_rest() -> None:
    own = os.urandom(20)
    t = RoutingTable(own)
    for i in range(3000):
        t.heard_from(os.urandom(20), ("10.0.%d.%d" % (i // 250, i % 250), 6881))
    assert all(len(b) <= 8 for b in t.buckets)
    assert len(t) == sum(len(b) for b in t.buckets) <= 8 * len(t.buckets)
    assert t.counters["full"] > 0
    # closest() is sorted by XOR distance
    target = os.urandom(20)
    near = t.closest(target, 8)
    ds = [distance(n.id, target) for n in near]
    assert ds == sorted(ds) and len(near) == 8


def test_table_ignores_own_id_and_rebinds_addresses() -> None:
    own = os.urandom(20)
    t = RoutingTable(own)
    assert not t.heard_from(own, ("1.1.1.1", 1))
    a, b = os.urandom(20), os.urandom(20)
    assert t.heard_from(a, ("1.1.1.1", 1))
    assert t.heard_from(b, ("1.1.1.1", 1))  # the address now speaks for another id
    assert [n.id for n in t.nodes()] == [b]
    t.failed(("1.1.1.1", 1))
    t.failed(("1.1.1.1", 1))
    assert t.closest(os.urandom(20)) == []  # bad nodes are not offered


def test_bep50_table_k1_with_home_and_sibling_of_8() -> None:
    own = os.urandom(20)
    t = RoutingTable(own, k=1, home_k=8)
    for i in range(3000):
        t.heard_from(os.urandom(20), ("10.1.%d.%d" % (i // 250, i % 250), 6881))
    n = len(t.buckets)
    assert all(len(b) <= 1 for b in t.buckets[:n - 2])  # uncles and above: K = 1
    assert t.capacity(n - 1) == t.capacity(n - 2) == 8
    assert len(t.buckets[n - 2]) >= 1


def test_bencode_of_krpc_is_canonical() -> None:
    q = krpc.encode_query(b"t", b"get", {b"target": NID, b"id": NID, b"seq": 3})
    assert bencode.encode(bencode.decode(q)) == q
