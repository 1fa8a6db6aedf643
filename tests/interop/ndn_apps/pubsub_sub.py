"""ndn-python-repo PubSub subscriber: subscribe to TOPIC, print every message received."""

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
    for topic in sys.argv[2:]:
        pb.subscribe(Name.from_str(topic), lambda m, t=topic: print(
            "MSG %s %s" % (t, bytes(m).decode(errors="replace")), flush=True))
    await asyncio.sleep(0.5)  # subscribe() returns before its registration is done
    print("READY", flush=True)
    await asyncio.sleep(float(sys.argv[1]))
    return 0


run(main, timeout_s=120)
