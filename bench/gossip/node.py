"""One pubmote GossipSub node for the gossip bench, driven by JSON lines on stdin like the
js-libp2p and py-libp2p peers (tests/interop/libp2p/js/peer.mjs, py/peer.py): prints
{"event": "ready", ...}, then answers dial / gs_* commands.

    .venv/bin/python bench/gossip/node.py [--gossip-opts JSON]
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
sys.path.insert(0, str(ROOT / "host"))

from pubmote.p2p import Host, KeyPair  # noqa: E402
from pubmote.p2p.pubsub.router import GossipConfig, GossipMessage, GossipSub  # noqa: E402

# (epoch << 16 | publisher index), seq, send time (s since the epoch): as the js and py
# peers write and read it. Receivers keep per-epoch counts and skip their own messages.
HEAD = struct.Struct(">IId")


class Stats:
    def __init__(self) -> None:
        self.count = 0
        self.dups = 0
        self.lat: list[float] = []
        self.keys: set[tuple[int, int]] = set()


class Bench:
    def __init__(self, index: int) -> None:
        self.index = index
        self.epochs: dict[int, Stats] = {}

    def stats(self, epoch: int) -> Stats:
        st = self.epochs.get(epoch)
        if st is None:
            st = self.epochs[epoch] = Stats()
        return st

    def on_message(self, m: GossipMessage) -> None:
        tag, seq, sent = HEAD.unpack_from(m.data, 0)
        if tag & 0xFFFF == self.index:
            return
        st = self.stats(tag >> 16)
        if (tag, seq) in st.keys:
            st.dups += 1
            return
        st.keys.add((tag, seq))
        st.count += 1
        st.lat.append((time.time() - sent) * 1000)


class Node:
    def __init__(self, opts: dict[str, Any]) -> None:
        self.host = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
        self.gs = GossipSub(self.host, GossipConfig(**opts))
        self.bench: dict[str, Bench] = {}

    async def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        c = cmd["cmd"]
        topic = cmd.get("topic", "")
        if c == "dial":
            conn = await self.host.connect(cmd["addr"])
            return {"peer": str(conn.peer_id)}
        if c == "gs_bench_start":
            b = self.bench[topic] = Bench(int(cmd["index"]))
            self.gs.subscribe(topic, b.on_message)
            return {}
        if c == "gs_peers":
            return {"mesh": [str(p) for p in self.gs.mesh_peers(topic)],
                    "subscribers": [str(p) for p in self.gs.peers(topic)],
                    "peers": [str(p) for p in self.gs.peers()]}
        if c == "gs_bench_publish":
            rate = float(cmd["rate"])
            pad = bytes(max(0, int(cmd.get("size", 16)) - HEAD.size))
            t0 = time.perf_counter()
            late = 0
            for i in range(int(cmd["count"])):
                wait = t0 + i / rate - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                elif wait < -0.05:
                    late += 1
                tag = int(cmd.get("epoch", 0)) << 16 | int(cmd["index"])
                await self.gs.publish(topic, HEAD.pack(tag, i, time.time()) + pad)
            return {"ms": (time.perf_counter() - t0) * 1000, "late": late}
        if c == "gs_bench_stats":
            bench = self.bench[topic]
            st = bench.stats(int(cmd["epoch"]))
            res = {"count": st.count, "dups": st.dups, "lat": [] if cmd.get("brief") else st.lat,
                   "counters": self.gs.counters}
            if cmd.get("drop"):
                for e in [e for e in bench.epochs if e <= int(cmd["epoch"])]:
                    del bench.epochs[e]
            return res
        if c == "stop":
            os._exit(0)
        raise ValueError("unknown command %s" % c)


def out(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main() -> None:
    args = sys.argv[1:]
    opts = json.loads(args[args.index("--gossip-opts") + 1]) if "--gossip-opts" in args else {}
    node = Node(opts)
    await node.host.start()
    await node.gs.start()
    out({"event": "ready", "peer": str(node.host.peer_id),
         "addrs": [str(a) for a in node.host.listen_addrs]})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks: set[asyncio.Task[None]] = set()

    async def run(cmd: dict[str, Any]) -> None:
        try:
            out({"id": cmd.get("id"), "ok": True, **await node.handle(cmd)})
        except Exception as e:  # noqa: BLE001 - reported to the bench, which goes on
            out({"id": cmd.get("id"), "ok": False, "error": "%s: %s" % (type(e).__name__, e)})

    while True:
        line = await reader.readline()
        if not line:
            break
        try:
            cmd = json.loads(line)
        except ValueError:
            continue
        t = asyncio.ensure_future(run(cmd))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
