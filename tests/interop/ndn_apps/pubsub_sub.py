"""ndn-python-repo PubSub subscriber: subscribe to each TOPIC, print every message received,
until stdin closes (the test closes it once it has seen what it needs)."""

from __future__ import annotations

import asyncio
import sys

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn_python_repo.utils import PubSub

from common import run


async def main(app: NDNApp) -> int:
    pb = PubSub(app, Name.from_str("/app/sub"))
    await pb.wait_for_ready()
    for topic in sys.argv[1:]:
        pb.subscribe(Name.from_str(topic), lambda m, t=topic: print(
            "MSG %s %s" % (t, bytes(m).decode(errors="replace")), flush=True))
    # subscribe() returns before its registration is done: the test waits for the bridge
    # to hold the subscriptions before it publishes
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    return 0


run(main, timeout_s=120)
