# Tests of pubmote_wire.subfilter: nanomsg's NN_SUB prefix filter semantics (the man
# page's example, a match table), reference-counted unsubscribe, the bound on topics.
from pubmote_wire.subfilter import SubFilter
from runner import raises


def test_sub_man_page_example():
    f = SubFilter()
    f.subscribe(b"foo")
    f.subscribe(b"bar")
    assert f.matches(b"foo|Hello!")
    assert not f.matches(b"baz|World!")
    assert f.matches(b"bar")
    assert not f.matches(b"fo")
    assert not f.matches(b"")


MATCH_TABLE = [
    # (subscriptions, message, matches)
    ([], b"anything", False),
    ([], b"", False),
    ([b""], b"anything", True),
    ([b""], b"", True),
    ([b"Hello"], b"Hello, World!", True),
    ([b"Hello"], b"Hell", False),
    ([b"Hello"], b"hello, World!", False),
    ([b"a", b"ab"], b"ab", True),
    ([b"abc", b"x"], b"ab", False),
    ([b"\x00\xff"], b"\x00\xff\x00", True),
    ([b"\x00\xff"], b"\x00\xfe", False),
]


def test_match_table():
    for subs, msg, want in MATCH_TABLE:
        f = SubFilter()
        for s in subs:
            f.subscribe(s)
        assert f.matches(msg) == want, (subs, msg)
        assert f.matches(bytearray(msg)) == want
        assert f.matches(memoryview(msg)) == want


def test_refcounted_unsubscribe():
    f = SubFilter()
    f.subscribe(b"t")
    f.subscribe(b"t")
    assert f.unsubscribe(b"t") is True
    assert f.matches(b"topic")
    assert f.unsubscribe(b"t") is True
    assert not f.matches(b"topic")
    assert f.unsubscribe(b"t") is False
    assert f.unsubscribe(b"never") is False
    assert f.prefixes() == [] and len(f) == 0


def test_unsubscribe_exact_topic_only():
    f = SubFilter()
    f.subscribe(b"abc")
    assert f.unsubscribe(b"ab") is False
    assert f.matches(b"abcd")
    f.subscribe(bytearray(b"x"))
    assert f.unsubscribe(memoryview(b"x")) is True


def test_prefixes_and_bound():
    f = SubFilter(max_topics=3)
    for t in (b"a", b"b", b"a", b"c"):
        f.subscribe(t)
    assert sorted(f.prefixes()) == [b"a", b"b", b"c"]
    assert raises(ValueError, f.subscribe, b"d")
    f.subscribe(b"b")  # an existing topic only counts up
    f.unsubscribe(b"c")
    f.subscribe(b"d")
    assert len(f) == 3
    assert SubFilter().max_topics == 64


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_subfilter")
