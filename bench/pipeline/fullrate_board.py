"""One board publishing as fast as the bridge acks, for the streaming bench beside the
bridge (stream_bridge.py): a light virtual board (bench/gateway/lightboard.py: the least
of the board protocol, over TCP with link batches) with LANES publishes in flight, each a
CBOR reading {"seq": n, "celsius": x}. Prints `ACKED n` (the total so far) every second
until it is stopped (SIGTERM or SIGINT).

    python bench/pipeline/fullrate_board.py HOST PORT [LANES]
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from lightboard import LightBoard

from pubmote_wire import cbor

TOPIC = "/pubmote/bench/board1/temperature"


async def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    lanes = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    board = LightBoard(host, port, "board1")
    await board.connect()
    acked = [0, 0]  # acked, failed
    seq = [0]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def lane() -> None:
        while not stop.is_set():
            n = seq[0]
            seq[0] = n + 1
            payload = cbor.dumps({"seq": n, "celsius": 18 + (n % 800) / 100})
            if await board.publish(TOPIC, payload):
                acked[0] += 1
            else:
                acked[1] += 1

    async def report() -> None:
        while not stop.is_set():
            print("ACKED %d %d %.3f" % (acked[0], acked[1], time.time()), flush=True)
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass

    print("READY", flush=True)
    tasks = [asyncio.create_task(lane()) for _ in range(lanes)]
    await report()
    print("ACKED %d %d %.3f" % (acked[0], acked[1], time.time()), flush=True)
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
