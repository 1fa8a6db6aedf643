"""The resource limits on their own: every limit is a config key with its default in the
bridge's DEFAULTS and a row of docs/limits.md, bad values are refused by the config
check, and the parts that enforce them (admission by address, the topic table, the PIT's
pools and face clean-up) do what the table says."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from pubmote.cli.config_check import ConfigError, check
from pubmote.core.admission import Admission, source_of
from pubmote.core.forwarder import Forwarder
from pubmote.core.limits import DEFAULTS, KEYS, LimitHits, Limits
from pubmote.core.messages import Message
from pubmote.core.topic_table import TopicTable
from pubmote.gateway.config import DEFAULTS as BRIDGE_DEFAULTS
from pubmote.gateway.config import load_config
from pubmote_wire import name as ndn_name

DOC = Path(__file__).resolve().parents[3] / "docs" / "limits.md"


def test_every_limit_is_a_bridge_key_and_a_documented_row() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| ([0-9.]+) \|", DOC.read_text(), re.M))
    assert set(rows) == set(KEYS)
    for key in KEYS:
        assert BRIDGE_DEFAULTS[key] == DEFAULTS[key]
        assert float(rows[key]) == DEFAULTS[key], key


@pytest.mark.parametrize("key", KEYS)
def test_bad_limit_values_are_refused_by_name(key: str) -> None:
    for bad in (0, -1, True, "10", None if isinstance(DEFAULTS[key], float) else 2.5):
        if bad is None:
            continue
        with pytest.raises(ConfigError, match=key):
            check(load_config(None, {key: bad}))
    cfg = load_config(None, {key: DEFAULTS[key] * 2})
    check(cfg)
    assert getattr(Limits.from_config(cfg), key) == DEFAULTS[key] * 2


def test_admission_counts_by_address_and_ipv6_by_its_64() -> None:
    assert source_of(("10.0.0.7", 5)) == "10.0.0.7"
    assert source_of(("::ffff:10.0.0.7", 5, 0, 0)) == "10.0.0.7"
    assert source_of(("2001:db8:1:2:aaaa::1", 5, 0, 0)) == source_of(("2001:db8:1:2::9", 6, 0, 0))
    assert source_of("/tmp/sock") is None and source_of("") is None
    hits = LimitHits()
    a = Admission("t", max_total=4, max_per_ip=2, hits=hits, total_key="sp_max_conns",
                  per_ip_key="sp_max_conns_per_ip")
    assert a.admit("x") and a.admit("x") and not a.admit("x")
    assert a.admit("y") and a.admit(None) and not a.admit("z")
    a.release("x")
    assert a.admit("z") and a.from_source("x") == 1
    assert hits.counts == {"sp_max_conns_per_ip": 1, "sp_max_conns": 1}


def test_topic_table_keeps_what_is_published_and_bounds_the_rest() -> None:
    hits = LimitHits()
    t = TopicTable(8, hits)
    for _ in range(3):
        t.note(Message(b"/hot", b"v", "b", "i"))
    for i in range(100):  # a flood of new topics, the hot one published now and then
        t.note(Message(b"/flood/%d" % i, b"v", "b", "i"))
        if i % 4 == 0:
            t.note(Message(b"/hot", b"v", "b", "i"))
    assert len(t) == 8 and hits.counts["max_topics"] == 100 + 1 - 8
    hot = t.get(b"/hot")
    assert hot is not None and hot.count == 3 + 25
    t.note(Message(b"/" + b"x" * 5000, b"y" * 5000, "b", "i"))
    long = [k for k in t.snapshot() if len(k) > 100]
    assert [len(k) for k in long] == [1024 + 3]
    assert len(t.get(long[0]).last_payload) == 1024  # type: ignore[union-attr]


class _Face:
    def __init__(self, face_id: int) -> None:
        self.face_id = face_id
        self.label = "f%d" % face_id
        self.sent: list[bytes] = []

    def send_packet(self, pkt: bytes) -> None:
        self.sent.append(pkt)


def test_pit_pools_lifetime_nonces_and_face_cleanup() -> None:
    async def body() -> None:
        fwd = Forwarder(max_pit=4, max_pit_per_face=3, max_lifetime_ms=50, max_nonces=2)
        a, b, board = _Face(1), _Face(2), _Face(3)
        for i in range(3):
            assert fwd.add_pending(ndn_name.from_uri("/a/%d" % i), i, 3_600_000, face=a)
        assert not fwd.add_pending(ndn_name.from_uri("/a/x"), 9, 1000, face=a)  # its share
        assert fwd.add_pending(ndn_name.from_uri("/b/0"), 1, 1000, face=b)
        assert not fwd.add_pending(ndn_name.from_uri("/b/1"), 2, 1000, face=b)  # all full
        # the hub's own Interests still find room (their own pool), within the share of
        # the face they are for; a refusal tells the sink at once
        heard: list[object] = []
        for k in range(3):
            assert fwd.add_pending(ndn_name.from_uri("/cmd/%d" % k), 5 + k, 1000, owner=board,
                                   sink=lambda d, r: heard.append("timeout"))
        assert not fwd.add_pending(ndn_name.from_uri("/cmd/3"), 9, 1000, owner=board,
                                   sink=lambda d, r: heard.append("refused"))
        assert heard == ["refused"]
        # nonces: one name aggregated under many, at most 2 kept
        for n in range(10, 20):
            fwd.add_pending(ndn_name.from_uri("/b/0"), n, 1000, face=b)
        entry = fwd.pit[ndn_name.from_uri("/b/0")]
        assert entry.nonces == [18, 19]
        # a's entries leave with it; /b/0 stays for b
        fwd.remove_face(a)
        assert sorted(ndn_name.to_uri(k) for k in fwd.pit) == ["/b/0", "/cmd/0", "/cmd/1",
                                                               "/cmd/2"]
        assert fwd.pending_of(a) == 0 and fwd.pending_of(b) == 1
        # one-hour lifetimes end at the cap
        await asyncio.sleep(0.2)
        assert not fwd.pit and heard == ["refused"] + ["timeout"] * 3
        assert fwd.hits.counts["pit_max_lifetime_ms"] == 7  # every entry: all above 50 ms
        assert fwd.hits.counts["pit_max_nonces"] == 9
        assert fwd.hits.counts["pit_max_per_face"] == 2 and fwd.hits.counts["pit_max"] == 1

    asyncio.run(body())
