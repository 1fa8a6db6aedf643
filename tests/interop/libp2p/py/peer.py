"""The py-libp2p peer of pubmote's mesh interop tests and bench (runs on trio, in its own
venv: build/peers/pylibp2p). Driven by JSON lines on stdin, like js/peer.mjs.

    python peer.py                   serve; print {"event": "ready", ...}; answer commands
    python peer.py --gossip [--gossip-opts JSON]   also run py-libp2p's GossipSub (gs_*)
    python peer.py --bench-self      two hosts in this process: throughput and ping rate
"""

from __future__ import annotations

import json
import logging
import os
import struct
import sys
import time

import multiaddr
import trio
from libp2p import new_host
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.custom_types import TProtocol
from libp2p.identity.identify.pb.identify_pb2 import Identify
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr

ECHO = TProtocol("/pubmote/echo/1.0.0")
SINK = TProtocol("/pubmote/sink/1.0.0")
PING = TProtocol("/ipfs/ping/1.0.0")
IDENTIFY = TProtocol("/ipfs/id/1.0.0")

logging.basicConfig(level=logging.CRITICAL)


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def read_exactly(stream, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = await stream.read(n - len(buf))
        if not chunk:
            raise EOFError("EOF after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


async def read_all(stream) -> bytes:
    from libp2p.network.stream.exceptions import StreamEOF
    parts = []
    while True:
        try:
            chunk = await stream.read(65536)
        except StreamEOF:
            break
        if not chunk:
            break
        parts.append(chunk)
    return b"".join(parts)


async def echo_handler(stream) -> None:
    from libp2p.network.stream.exceptions import StreamEOF
    while True:
        try:
            chunk = await stream.read(65536)
        except StreamEOF:
            break
        if not chunk:
            break
        await stream.write(chunk)
    await stream.close()


async def sink_handler(stream) -> None:
    data_len = len(await read_all(stream))
    await stream.write(data_len.to_bytes(8, "big"))
    await stream.close()


# -- gossipsub ----------------------------------------------------------------------------
GOSSIP: dict = {}          # "pubsub", "router", "nursery" once running with --gossip
RECEIVED: dict[str, list[dict]] = {}
BENCH: dict[str, dict] = {}
MAX_KEPT = 10000
_BENCH_HEAD = struct.Struct(">IId")  # publisher index, seq, send time (s since the epoch)


def make_gossip(host, opts: dict):
    from libp2p.pubsub.gossipsub import PROTOCOL_ID, PROTOCOL_ID_V11, PROTOCOL_ID_V12, GossipSub
    from libp2p.pubsub.pubsub import Pubsub

    hb = float(opts.get("heartbeat_s", 1.0))
    router = GossipSub(
        protocols=[PROTOCOL_ID_V12, PROTOCOL_ID_V11, PROTOCOL_ID],
        degree=opts.get("D", 6), degree_low=opts.get("D_low", 4),
        degree_high=opts.get("D_high", 12), heartbeat_interval=hb,  # type: ignore[arg-type]
        heartbeat_initial_delay=0.1, time_to_live=60, gossip_window=3, gossip_history=5,
        # Its defaults cap publishing at 10 msg/s per topic and refuse a mesh of peers on
        # one IP (every peer here is on 127.0.0.1): both off for tests and bench.
        spam_protection_enabled=False, max_messages_per_topic_per_second=1e9,
        eclipse_protection_enabled=False, max_pending_messages_per_peer=10000,
    )
    pubsub = Pubsub(host, router, cache_size=100000, strict_signing=True)
    return pubsub, router


def epoch_stats(b: dict, epoch: int) -> dict:
    st = b["epochs"].get(epoch)
    if st is None:
        st = b["epochs"][epoch] = {"count": 0, "dups": 0, "lat": [], "keys": set()}
    return st


async def gossip_receive(topic: str, sub) -> None:
    while True:
        msg = await sub.get()
        b = BENCH.get(topic)
        if b is not None:
            # (epoch << 16 | publisher index), seq, send time; our own copies are skipped
            tag, seq, sent = _BENCH_HEAD.unpack_from(msg.data, 0)
            if tag & 0xFFFF == b["self"]:
                continue
            st = epoch_stats(b, tag >> 16)
            if (tag, seq) in st["keys"]:
                st["dups"] += 1
            else:
                st["keys"].add((tag, seq))
                st["count"] += 1
                st["lat"].append((time.time() - sent) * 1000)
            continue
        lst = RECEIVED.setdefault(topic, [])
        if len(lst) < MAX_KEPT:
            lst.append({"from": ID(msg.from_id).to_base58() if msg.from_id else None,
                        "data": msg.data.hex(), "seqno": msg.seqno.hex()})


async def gossip_cmd(c: str, cmd: dict) -> dict:
    pubsub = GOSSIP["pubsub"]
    topic = cmd.get("topic", "")
    if c in ("gs_subscribe", "gs_bench_start"):
        if c == "gs_bench_start":
            BENCH[topic] = {"self": cmd["index"], "epochs": {}}
        if topic not in pubsub.topic_ids:
            sub = await pubsub.subscribe(topic)
            GOSSIP["nursery"].start_soon(gossip_receive, topic, sub)
        return {}
    if c == "gs_unsubscribe":
        await pubsub.unsubscribe(topic)
        return {}
    if c == "gs_publish":
        await pubsub.publish(topic, bytes.fromhex(cmd["data"]))
        return {}
    if c == "gs_received":
        return {"messages": RECEIVED.get(topic, [])}
    if c == "gs_wait":
        return await wait_received(topic, cmd)
    if c == "gs_peers":
        router = GOSSIP["router"]
        return {"mesh": [p.to_base58() for p in router.mesh.get(topic, ())],
                "subscribers": [p.to_base58() for p in pubsub.peer_topics.get(topic, ())],
                "peers": [str(p) for p in pubsub.peers]}
    if c == "gs_bench_publish":
        return await bench_publish(pubsub, topic, cmd)
    if c == "gs_bench_stats":
        return bench_stats(topic, cmd)
    raise ValueError("unknown command %s" % c)


async def wait_received(topic: str, cmd: dict) -> dict:
    """gs_wait: until `count` messages on topic, or timeout_ms."""
    t0 = time.monotonic()
    while (len(RECEIVED.get(topic, [])) < cmd["count"]
           and time.monotonic() - t0 < cmd.get("timeout_ms", 5000) / 1000):
        await trio.sleep(0.02)
    return {"messages": RECEIVED.get(topic, [])}


async def bench_publish(pubsub, topic: str, cmd: dict) -> dict:
    """gs_bench_publish: `count` messages at `rate` per second, each stamped with its
    tag, index and send time; how long it took and how many left late."""
    t0 = time.perf_counter()
    late = 0
    pad = bytes(max(0, cmd.get("size", 16) - _BENCH_HEAD.size))
    for i in range(cmd["count"]):
        due = t0 + i / cmd["rate"]
        wait = due - time.perf_counter()
        if wait > 0:
            await trio.sleep(wait)
        elif wait < -0.05:
            late += 1
        tag = cmd.get("epoch", 0) << 16 | cmd["index"]
        await pubsub.publish(topic, _BENCH_HEAD.pack(tag, i, time.time()) + pad)
    return {"ms": (time.perf_counter() - t0) * 1000, "late": late}


def bench_stats(topic: str, cmd: dict) -> dict:
    """gs_bench_stats: what arrived of an epoch (with drop: forget it and the earlier)."""
    b = BENCH[topic]
    st = epoch_stats(b, cmd["epoch"])
    res = {"count": st["count"], "dups": st["dups"],
           "lat": [] if cmd.get("brief") else st["lat"]}
    if cmd.get("drop"):
        for e in [e for e in b["epochs"] if e <= cmd["epoch"]]:
            del b["epochs"][e]
    return res


def make_host():
    host = new_host(key_pair=create_new_key_pair())
    host.set_stream_handler(ECHO, echo_handler)
    host.set_stream_handler(SINK, sink_handler)
    return host


def pattern(size: int, seed: int) -> bytes:
    return bytes(((i * 31 + seed) & 0xFF) for i in range(size))


async def ping_rounds(host, peer: ID, count: int) -> list[float]:
    stream = await host.new_stream(peer, [PING])
    rtts = []
    for _ in range(count):
        data = os.urandom(32)
        t0 = time.perf_counter()
        await stream.write(data)
        echo = await read_exactly(stream, 32)
        rtts.append((time.perf_counter() - t0) * 1000)
        if echo != data:
            raise ValueError("ping echo differs")
    await stream.close()
    return rtts


async def echo_once(host, peer: ID, size: int, chunk: int, seed: int) -> None:
    stream = await host.new_stream(peer, [ECHO])
    data = pattern(size, seed)
    got = bytearray()

    async def writer() -> None:
        for off in range(0, size, chunk):
            await stream.write(data[off:off + chunk])

    async with trio.open_nursery() as n:
        n.start_soon(writer)
        got += await read_exactly(stream, size)
    await stream.close()
    if bytes(got) != data:
        raise ValueError("echo differs")


async def sink_transfer(host, peer: ID, size: int, chunk: int) -> tuple[float, int]:
    stream = await host.new_stream(peer, [SINK])
    block = bytes(chunk)
    t0 = time.perf_counter()
    for off in range(0, size, chunk):
        await stream.write(block[:min(chunk, size - off)])
    await stream.close()
    ack = await read_exactly(stream, 8)
    return (time.perf_counter() - t0) * 1000, int.from_bytes(ack, "big")


async def identify(host, peer: ID) -> dict:
    stream = await host.new_stream(peer, [IDENTIFY])
    data = await read_all(stream)
    await stream.close()
    # varint length prefix, then the protobuf
    n, shift, pos = 0, 0, 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    msg = Identify()
    msg.ParseFromString(data[pos:pos + n])
    return {"protocols": list(msg.protocols),
            "listenAddrs": [str(multiaddr.Multiaddr(a)) for a in msg.listen_addrs],
            "agentVersion": msg.agent_version, "protocolVersion": msg.protocol_version,
            "observedAddr": str(multiaddr.Multiaddr(msg.observed_addr))
            if msg.observed_addr else None,
            "publicKey": msg.public_key.hex(),
            "prefixed": len(data) == pos + n}


async def handle(host, cmd: dict) -> dict:
    c = cmd["cmd"]
    if c == "dial":
        info = info_from_p2p_addr(multiaddr.Multiaddr(cmd["addr"]))
        await host.connect(info)
        return {"peer": info.peer_id.to_string()}
    peer = ID.from_base58(cmd["peer"]) if "peer" in cmd else None
    if c == "ping":
        return {"rtts": await ping_rounds(host, peer, cmd.get("count", 1))}
    if c == "identify":
        return await identify(host, peer)
    if c == "echo":
        await echo_once(host, peer, cmd["size"], cmd.get("chunk", 65536), cmd.get("seed", 7))
        return {}
    if c == "streams":
        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for i in range(cmd["count"]):
                n.start_soon(echo_once, host, peer, cmd["size"], cmd["size"], i)
        return {"ms": (time.perf_counter() - t0) * 1000}
    if c == "sink":
        ms, got = await sink_transfer(host, peer, cmd["size"], cmd.get("chunk", 65536))
        return {"ms": ms, "got": got}
    if c == "handle":
        host.set_stream_handler(TProtocol(cmd["protocol"]), echo_handler)
        return {}
    if c == "protocols":
        return {"protocols": list(host.get_peerstore().get_protocols(peer))}
    if c == "connections":
        return {"peers": [p.to_string() for p in host.get_network().connections]}
    if c.startswith("gs_"):
        if "pubsub" not in GOSSIP:
            raise ValueError("not started with --gossip")
        return await gossip_cmd(c, cmd)
    if c == "stop":
        raise SystemExit(0)
    raise ValueError("unknown command %s" % c)


async def run_command(host, cmd: dict) -> None:
    try:
        res = await handle(host, cmd)
        out({"id": cmd.get("id"), "ok": True, **res})
    except SystemExit:
        out({"id": cmd.get("id"), "ok": True})
        os._exit(0)
    except BaseException as e:  # noqa: BLE001 - reported to the test (trio's groups too); serves on
        out({"id": cmd.get("id"), "ok": False, "error": "%s: %s" % (type(e).__name__, e)})


async def serve(gossip_opts: dict | None) -> None:
    host = make_host()
    async with host.run(listen_addrs=[multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        if gossip_opts is None:
            await serve_commands(host)
            return
        from libp2p.tools.anyio_service import background_trio_service
        pubsub, router = make_gossip(host, gossip_opts)
        async with background_trio_service(pubsub), background_trio_service(router):
            await pubsub.wait_until_ready()
            GOSSIP["pubsub"] = pubsub
            GOSSIP["router"] = router
            await serve_commands(host)


async def serve_commands(host) -> None:
    addrs = [str(a) for a in host.get_addrs()]
    out({"event": "ready", "peer": host.get_id().to_string(), "addrs": addrs})
    stdin = trio.lowlevel.FdStream(os.dup(0))
    buf = b""
    async with trio.open_nursery() as nursery:
        GOSSIP["nursery"] = nursery
        while True:
            data = await stdin.receive_some(65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    cmd = json.loads(line)
                except ValueError:
                    continue
                nursery.start_soon(run_command, host, cmd)
        nursery.cancel_scope.cancel()
    os._exit(0)


async def bench_self(size_mb: int, ping_seconds: float) -> None:
    a, b = make_host(), make_host()
    la = [multiaddr.Multiaddr("/ip4/127.0.0.1/tcp/0")]
    async with a.run(listen_addrs=la), b.run(listen_addrs=la):
        baddr = next(x for x in b.get_addrs() if "127.0.0.1" in str(x))
        if "/p2p/" not in str(baddr):
            baddr = multiaddr.Multiaddr(str(baddr) + "/p2p/" + b.get_id().to_string())
        await a.connect(info_from_p2p_addr(baddr))
        await sink_transfer(a, b.get_id(), 1024 * 1024, 65536)  # warm-up
        size = size_mb * 1024 * 1024
        ms, got = await sink_transfer(a, b.get_id(), size, 65536)
        if got != size:
            raise ValueError("sink got %d of %d" % (got, size))
        stream = await a.new_stream(b.get_id(), [PING])
        data = bytes(32)
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < ping_seconds:
            await stream.write(data)
            await read_exactly(stream, 32)
            n += 1
        dt = time.perf_counter() - t0
        out({"throughput_mb_s": size / 1e6 / (ms / 1000), "pings_per_s": n / dt})
    os._exit(0)


def main() -> None:
    args = sys.argv[1:]
    if "--bench-self" in args:
        size = int(args[args.index("--size-mb") + 1]) if "--size-mb" in args else 16
        secs = float(args[args.index("--ping-seconds") + 1]) if "--ping-seconds" in args else 2
        trio.run(bench_self, size, secs)
    else:
        opts = None
        if "--gossip" in args:
            opts = json.loads(args[args.index("--gossip-opts") + 1]) \
                if "--gossip-opts" in args else {}
        trio.run(serve, opts)


if __name__ == "__main__":
    main()
