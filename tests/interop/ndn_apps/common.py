"""Shared set-up of the NDN application processes the interop tests start: python-ndn's
NDNApp on the transport in NDN_CLIENT_TRANSPORT, digest keychain, a bounded run."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

from ndn.app import NDNApp
from ndn.security import KeychainDigest


def run(main: Callable[[NDNApp], Awaitable[int]], timeout_s: float = 30) -> None:
    app = NDNApp(keychain=KeychainDigest())
    code = [1]

    async def wrapper() -> None:
        try:
            code[0] = await asyncio.wait_for(main(app), timeout_s)
        except Exception as e:  # noqa: BLE001 - reported to the test through stdout
            print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
        finally:
            app.shutdown()

    app.run_forever(after_start=wrapper())
    sys.exit(code[0])
