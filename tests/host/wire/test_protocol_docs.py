"""The bytes in docs/protocols/ are what the code makes: each frame a page shows (under a
`<!-- vector: NAME -->` line) is built again here and compared, so the pages cannot drift
from the code. The control packets come from pubmote_wire.control, which the board and
the bridge both use."""

from __future__ import annotations

import re
from pathlib import Path

from pubmote.dht import bep44, krpc
from pubmote.dht.node import VERSION as DHT_VERSION
from pubmote.gateway.mesh.envelope import Envelope
from pubmote.gateway.mesh.relay import directed_payload
from pubmote.gateway.retained import salt_of
from pubmote_wire import cbor, control, data, interest, notify, sp
from pubmote_wire import name as ndn_name
from pubmote_wire.subfilter import SubFilter

DOCS = Path(__file__).resolve().parents[3] / "docs" / "protocols"


def vectors(page: str = "control.md") -> dict[str, str]:
    text = (DOCS / page).read_text()
    out = {}
    for m in re.finditer(r"<!-- vector: ([\w-]+) -->\s*```\n(.*?)```", text, re.S):
        out[m.group(1)] = "".join(m.group(2).split())
    return out


def test_the_page_shows_the_codecs_bytes() -> None:
    params = control.register_params("b1", "/pubmote/node/b1", [b"/cmd/"], [], False, None,
                                     None)
    assert params == cbor.dumps({"name": "b1", "prefix": "/pubmote/node/b1",
                                 "filters": [b"/cmd/"], "serve": []})
    buf = bytearray(256)
    n = control.encode_register(buf, 0, b"b1", params, 0x0A0B0C0D, 1500, None, None, None)
    register = bytes(buf[:n])
    full = bytes(interest.decode_interest(register).name)
    reply = data.encode(full, control.reply_content("/pubmote/gw/gw1", 1700000000000, False),
                        freshness_ms=0, signer=notify.DIGEST)
    hello = control.encode_hello(bytes.fromhex("01020304"), 0x0A0B0C0D)
    assert vectors() == {"register": register.hex(), "register-reply": reply.hex(),
                         "hello": hello.hex()}
    assert ndn_name.to_uri(full).startswith("/pubmote/ctl/register/b1/params-sha256=")


def test_the_sleep_page_shows_the_announcement() -> None:
    params = control.register_params("b1", "/pubmote/node/b1", [b"/cmd/"], [], 0, 7, 10000)
    assert cbor.loads(params)["sleep"] == 10000
    assert vectors("sleep.md") == {"sleep-params": params.hex()}


def test_the_filters_page_shows_sp_bytes() -> None:
    msg = b"/cmd/led|on"
    filt = SubFilter()
    filt.subscribe(b"/cmd/")
    assert filt.matches(msg)  # the page says the filter selects this message
    assert vectors("filters.md") == {"sp-sub-header": sp.header(sp.SUB).hex(),
                                     "sp-msg": sp.encode_msg(msg).hex()}


def test_the_mesh_page_shows_envelope_bytes() -> None:
    common = {"board": "b1", "gateway": "gw1", "ts_ms": 1700000000000,
              "epoch": 1699999990000}
    env = Envelope(topic="/pubmote/demo/b1/t", payload=b"21.5", seq=7, **common)
    directed = Envelope(topic="/cmd/led", payload=b"on", seq=8, address="/gw2/b2",
                        originator="/gw1/b1", **common)
    received = directed_payload("/gw2/b2", "/gw1/b1", "/cmd/led", b"on", 1700000000000)
    assert vectors("mesh.md") == {"envelope": env.encode().hex(),
                                  "directed-envelope": directed.encode().hex(),
                                  "directed-payload": received.hex()}
    assert Envelope.decode(directed.encode()).address == "/gw2/b2"


def test_the_dht_page_shows_a_put() -> None:
    topic = b"/pubmote/demo/b1/t"
    item = bep44.sign_item(bep44.KeyPair(bytes(range(32))), b"21.5", 1700000000000,
                           salt_of(topic))
    put = krpc.encode_query(b"aa", b"put", item.put_args(bytes(20), bytes(range(8))),
                            topic=item.target, version=DHT_VERSION)
    assert vectors("dht-retained.md") == {"put": put.hex()}
    assert item.verify() and item.salt == topic
