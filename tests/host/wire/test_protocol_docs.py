"""The bytes in docs/protocols/control.md are what the codec makes: each packet the page
shows (under a `<!-- vector: NAME -->` line) is built again here and compared, so the
page cannot drift from the code. The bridge's own names and ack come from core/control.py."""

from __future__ import annotations

import re
from pathlib import Path

from pubmote.core.control import HELLO, REGISTER, SIGNER
from pubmote_wire import cbor, data, interest
from pubmote_wire import name as ndn_name

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocols" / "control.md"


def vectors() -> dict[str, str]:
    text = DOC.read_text()
    out = {}
    for m in re.finditer(r"<!-- vector: ([\w-]+) -->\s*```\n(.*?)```", text, re.S):
        out[m.group(1)] = "".join(m.group(2).split())
    return out


def test_the_page_shows_the_codecs_bytes() -> None:
    params = cbor.dumps({"name": "b1", "prefix": "/pubmote/node/b1", "filters": [b"/cmd/"],
                         "serve": []})
    register = interest.encode(REGISTER + ndn_name.generic(b"b1"), nonce=0x0A0B0C0D,
                               lifetime_ms=1500, app_params=params, must_be_fresh=True)
    full = bytes(interest.decode_interest(register).name)
    reply = data.encode(full, cbor.dumps({"gateway": "/pubmote/gw/gw1",
                                          "time_ms": 1700000000000}),
                        freshness_ms=0, signer=SIGNER)
    hello = interest.encode(HELLO + ndn_name.generic(bytes.fromhex("01020304")),
                            nonce=0x0A0B0C0D, lifetime_ms=1000)
    assert vectors() == {"register": register.hex(), "register-reply": reply.hex(),
                         "hello": hello.hex()}
    assert ndn_name.to_uri(full).startswith("/pubmote/ctl/register/b1/params-sha256=")
