"""ndn-python-repo PubSub publisher: publish MSG on TOPIC COUNT times; print each result.
With a third argument (a forwarding hint) the publisher prefix is not announced at all:
only the hint is registered, so the bridge must route the fetch by the hint."""

from __future__ import annotations

import asyncio
import sys

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn_python_repo.utils import PubSub

from common import run


async def main(app: NDNApp) -> int:
    topic, msg, count = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
    hint = sys.argv[4] if len(sys.argv) > 4 else None
    prefix = Name.from_str("/app/pub")
    if hint:
        pb = PubSub(app, prefix, forwarding_hint=Name.from_str(hint))
        app.set_interest_filter([*prefix, "msg"], pb._on_msg_interest)
        await app.register(Name.from_str(hint), None)
    else:
        pb = PubSub(app, prefix)
        await pb.wait_for_ready()
    ok = 0
    for i in range(count):
        if await pb.publish(Name.from_str(topic), msg + b"-%d" % i):
            ok += 1
        print("PUBLISHED %d" % i, flush=True)
        await asyncio.sleep(0.05)
    print("OK %d" % ok, flush=True)
    return 0


run(main)
