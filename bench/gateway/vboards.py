"""Virtual boards for the gateway-capacity bench, on one asyncio loop, each on its own TCP
connection, as WiFi boards would be: N light pubmote boards (lightboard.py: registration
and one-record link batches with the shared codec), N pubmote Nodes (the board firmware
itself, run by CPython), or N MQTT 3.1.1 clients to a broker, publishing with QoS 1.

Each board publishes /bench/<board> with payload "<seq> <time_ns>", one message in flight
(the next after the ack), at `rate` messages/s (0: as fast as acks come) for `seconds`.
Prints one JSON line: acked, failed, seconds, per-message latency p50/p99 (ms) and this
process's CPU seconds.

  vboards.py light HOST PORT N RATE SECONDS
  vboards.py pubmote HOST PORT N RATE SECONDS
  vboards.py mqtt HOST PORT N RATE SECONDS
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "firmware"), str(Path(__file__).parent)]

from pubmote_node.node import Node  # noqa: E402


class TcpLink:
    """The firmware's link interface over CPython asyncio streams."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.r, self.w = await asyncio.open_connection(self.host, self.port)

    async def readinto(self, buf: bytearray) -> int:
        assert self.r is not None
        d = await self.r.read(len(buf))
        buf[: len(d)] = d
        return len(d)

    async def write(self, mv: memoryview) -> None:
        assert self.w is not None
        self.w.write(bytes(mv))

    def close(self) -> None:
        if self.w is not None:
            self.w.close()
            self.w = None


class MqttClient:
    """The least of MQTT 3.1.1 a QoS 1 publisher needs: CONNECT, PUBLISH, PUBACK."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id.encode()
        self.pid = 0
        self.acks: dict[int, asyncio.Future[None]] = {}

    async def connect(self) -> None:
        self.r, self.w = await asyncio.open_connection(self.host, self.port)
        body = b"\x00\x04MQTT\x04\x02\x00\x00" + struct.pack(">H", len(self.client_id))
        self.w.write(b"\x10" + _varint(len(body) + len(self.client_id)) + body
                     + self.client_id)
        head = await self.r.readexactly(4)
        if head[0] != 0x20 or head[3] != 0:
            raise ConnectionError("CONNACK refused: %r" % head)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            h = await self.r.readexactly(2)
            if h[0] == 0x40:  # PUBACK
                pid = struct.unpack(">H", await self.r.readexactly(2))[0]
                f = self.acks.pop(pid, None)
                if f is not None and not f.done():
                    f.set_result(None)
            else:
                await self.r.readexactly(h[1])

    async def publish(self, topic: bytes, payload: bytes) -> bool:
        self.pid = self.pid % 65535 + 1
        body = struct.pack(">H", len(topic)) + topic + struct.pack(">H", self.pid) + payload
        f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks[self.pid] = f
        self.w.write(b"\x32" + _varint(len(body)) + body)
        try:
            await asyncio.wait_for(f, 10)
        except TimeoutError:
            return False
        return True


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


async def _board(publish: Any, label: str, rate: float, seconds: float,
                 lat: list[float], counts: list[int]) -> None:
    topic = "/bench/%s" % label
    period = 1.0 / rate if rate > 0 else 0.0
    t_end = time.monotonic() + seconds
    nxt = time.monotonic()
    seq = 0
    while time.monotonic() < t_end:
        t0 = time.time_ns()
        ok = await publish(topic, b"%d %d" % (seq, t0))
        seq += 1
        if ok:
            counts[0] += 1
            lat.append((time.time_ns() - t0) / 1e6)
        else:
            counts[1] += 1
        if period:
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


async def main() -> None:
    kind, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rate, seconds = float(sys.argv[5]), float(sys.argv[6])
    pubs = []
    running: list[asyncio.Task[None]] = []
    if kind == "pubmote":
        # PUBMOTE_BENCH_BATCH=0: NDN notifies per message instead of link batches
        batches = os.environ.get("PUBMOTE_BENCH_BATCH", "1") != "0"
        nodes = [Node({"name": "v%d" % i, "link": "tcp", "timeout_ms": 5000, "batch": batches},
                      link=TcpLink(host, port)) for i in range(n)]
        # held: the loop keeps only a weak reference to a task
        running.extend(asyncio.create_task(node.run()) for node in nodes)
        deadline = time.monotonic() + 60
        while not all(node.connected for node in nodes):
            if time.monotonic() > deadline:
                sys.exit("virtual boards did not all register within 60 s")
            await asyncio.sleep(0.05)
        pubs = [(node.publish, node.name) for node in nodes]
    elif kind == "light":
        from lightboard import LightBoard  # bench/gateway/lightboard.py

        boards = [LightBoard(host, port, "v%d" % i) for i in range(n)]
        await asyncio.gather(*(b.connect() for b in boards))
        pubs = [(b.publish, b.board) for b in boards]
    else:
        clients = [MqttClient(host, port, "v%d" % i) for i in range(n)]
        await asyncio.gather(*(c.connect() for c in clients))

        def mqtt_pub(c: MqttClient) -> Any:
            return lambda topic, payload: c.publish(topic.encode(), payload)

        pubs = [(mqtt_pub(c), "v%d" % i) for i, c in enumerate(clients)]
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # go
    lat: list[float] = []
    counts = [0, 0]
    cpu0, t0 = time.process_time(), time.monotonic()
    await asyncio.gather(*(_board(p, label, rate, seconds, lat, counts) for p, label in pubs))
    elapsed = time.monotonic() - t0
    lat.sort()

    def pick(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else -1.0

    print(json.dumps({"acked": counts[0], "failed": counts[1], "seconds": elapsed,
                      "p50": pick(0.5), "p99": pick(0.99),
                      "cpu_s": time.process_time() - cpu0}), flush=True)
    os._exit(0)  # the boards' tasks run forever


if __name__ == "__main__":
    asyncio.run(main())
