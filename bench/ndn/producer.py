"""Bench producer (python-ndn): answer every Interest under PREFIX at once."""

from __future__ import annotations

import sys

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn.security import KeychainDigest

app = NDNApp(keychain=KeychainDigest())
PREFIX = Name.from_str(sys.argv[1])


@app.route(PREFIX)
def on_interest(name, param, app_param):  # type: ignore[no-untyped-def]
    app.put_data(name, b"x" * 100, freshness_period=0)


app.run_forever()
