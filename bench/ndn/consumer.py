"""Bench consumer (python-ndn): PREFIX SECONDS WINDOW -> Interest/Data round trips per
second with WINDOW Interests in flight, each a fresh name under PREFIX."""

from __future__ import annotations

import asyncio
import sys
import time

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn.security import KeychainDigest
from ndn.types import InterestNack, InterestTimeout


async def main(app: NDNApp) -> None:
    prefix, seconds, window = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    done = failed = 0
    counter = 0
    stop = time.monotonic() + seconds
    rtts: list[float] = []

    async def lane() -> None:
        nonlocal done, failed, counter
        while time.monotonic() < stop:
            counter += 1
            t0 = time.perf_counter()
            try:
                await app.express_interest(Name.from_str("%s/%d" % (prefix, counter)),
                                           must_be_fresh=True, lifetime=2000)
                done += 1
                rtts.append(time.perf_counter() - t0)
            except (InterestNack, InterestTimeout):
                failed += 1

    t0 = time.monotonic()
    await asyncio.gather(*(lane() for _ in range(window)))
    rtts.sort()
    p50 = rtts[len(rtts) // 2] * 1000 if rtts else float("nan")
    print("RESULT %.1f %d %.2f" % (done / (time.monotonic() - t0), failed, p50), flush=True)
    app.shutdown()


app = NDNApp(keychain=KeychainDigest())
app.run_forever(after_start=main(app))
