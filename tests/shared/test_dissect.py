# Tests of pubmote_wire.dissect: the JSON tree of every captured packet, and bad input.
# unix-heap: 128k  (dissect loads the whole codec; the 64-bit port doubles every object)
import vectors
from pubmote_wire import dissect
from pubmote_wire.errors import DecodeError
from runner import raises


def _get(node, key):
    for k, v in node:
        if k == key:
            return v
    raise KeyError(key)


def test_notify_interest_tree():
    pkt = vectors.ndn_notify()["notify Interest"]
    tree = dissect.dissect(pkt)
    assert _get(tree, "packet") == "Interest"
    assert _get(tree, "length") == len(pkt)
    els = _get(tree, "elements")
    assert _get(els[0], "type") == "Name"
    assert _get(els[0], "uri").startswith("/scout/topic/notify/params-sha256=2d361ce3")
    assert _get(els[2], "value") == 4000
    n = _get(tree, "notify")
    assert _get(n, "publisher") == "/scout/pub"
    assert _get(n, "nonce") == "cafebabe"
    sig = _get(tree, "signature")
    assert _get(sig, "type") == "DigestSha256"
    assert _get(sig, "valid") is True


def test_every_vector_dissects_and_digests_verify():
    for label, pkt in vectors.ndn_notify().items():
        tree = dissect.dissect(pkt)
        if label == "msg Interest":  # the one unsigned packet of the exchange
            assert "signature" not in [k for k, _ in tree]
            continue
        assert _get(_get(tree, "signature"), "valid") is True, label
        text = dissect.to_json(tree)
        assert text.startswith("{\n") and text.endswith("}")


def test_tampered_signature_is_reported_invalid():
    pkt = bytearray(vectors.ndn_notify()["msg Data"])
    pkt[-1] ^= 1
    tree = dissect.dissect(bytes(pkt))
    assert _get(_get(tree, "signature"), "valid") is False


def test_lp_nack_tree():
    from pubmote_wire import lp

    inner = vectors.ndn_notify()["msg Interest"]
    buf = bytearray(len(inner) + 32)
    n = lp.encode_nack(buf, 0, inner, lp.NACK_NO_ROUTE)
    tree = dissect.dissect(bytes(buf[:n]))
    assert _get(tree, "packet") == "LpPacket"
    els = _get(tree, "elements")
    nack = next(e for e in els if _get(e, "type") == "Nack")
    assert _get(_get(nack, "elements")[0], "reason") == "NoRoute"
    frag = next(e for e in els if _get(e, "type") == "Fragment")
    assert _get(_get(frag, "packet"), "packet") == "Interest"


def test_json_escaping():
    assert dissect.to_json([("a", 'x"\\\n\x01')]) == '{\n  "a": "x\\"\\\\\\n\\u0001"\n}'
    assert dissect.to_json([]) == "[]"
    assert dissect.to_json([("n", None), ("t", True), ("f", False)]) == (
        '{\n  "n": null,\n  "t": true,\n  "f": false\n}')


MALFORMED = ["", "05", "0502", "0500", "06020701", "0a00", "64026401", "zz", "050"]


def test_malformed_input_is_one_line_error():
    for h in MALFORMED:
        out, ok = dissect.dissect_hex(h)
        assert not ok, h
        assert out.startswith("error: ") and "\n" not in out, h


def test_dissect_raises_decode_error_only():
    pkt = vectors.ndn_notify()["notify Interest"]
    for cut in range(len(pkt)):
        assert raises(DecodeError, dissect.dissect, pkt[:cut])


if __name__ == "__main__":
    import runner

    runner.main(globals(), "test_dissect")
