"""Mesh bench: Yamux throughput over one Noise-secured loopback connection (MB/s) and
/ipfs/ping/1.0.0 round trips per second, for pubmote, js-libp2p and py-libp2p, measured in
this same run; each implementation talks to itself, both ends in one process.

    .venv/bin/python bench/mesh/run.py [--size-mb 32] [--ping-seconds 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "tests" / "interop" / "libp2p"))
sys.path.insert(0, str(ROOT / "tests" / "host"))

from libp2p_peers import PeerProcess, js_command, py_command, start_js, start_py  # noqa: E402
from mesh_util import sink_handler  # noqa: E402 - the tests' sink protocol handler

from pubmote.p2p import Host, KeyPair, PeerId  # noqa: E402

SINK = "/pubmote/sink/1.0.0"
CHUNK = 65536


async def _transfer(a: Host, b: Host, size: int) -> float:
    st = await a.new_stream(b.peer_id, [SINK])
    block = bytes(CHUNK)
    t0 = time.perf_counter()
    sent = 0
    while sent < size:
        n = min(CHUNK, size - sent)
        await st.write(block if n == CHUNK else block[:n])
        sent += n
    await st.close()
    got = int.from_bytes(await st.readexactly(8), "big")
    dt = time.perf_counter() - t0
    if got != size:
        raise RuntimeError("sink got %d of %d bytes" % (got, size))
    return dt


async def bench_pubmote(size_mb: int, ping_seconds: float) -> dict[str, float]:
    a = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
    b = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
    b.set_stream_handler(SINK, sink_handler)
    async with a, b:
        await a.connect(b.listen_addrs[0].with_p2p(str(b.peer_id)))
        await _transfer(a, b, 4 * 1024 * 1024)             # warm-up
        size = size_mb * 1024 * 1024
        dt = await _transfer(a, b, size)
        st = await a.new_stream(b.peer_id, ["/ipfs/ping/1.0.0"])
        payload = bytes(32)
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < ping_seconds:
            await st.write(payload)
            await st.readexactly(32)
            n += 1
        pdt = time.perf_counter() - t0
        await st.close()
    return {"throughput_mb_s": size / 1e6 / dt, "pings_per_s": n / pdt}


async def bench_cross(kind: str, size_mb: int) -> dict[str, float]:
    """pubmote against a running peer: MB/s each way over one connection."""
    peer: PeerProcess = await (start_js() if kind == "js" else start_py())
    try:
        h = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
        h.set_stream_handler(SINK, sink_handler)
        async with h:
            await h.connect(peer.addr)
            pid = PeerId.from_base58(peer.peer_id)
            size = size_mb * 1024 * 1024
            st = await h.new_stream(pid, [SINK])
            block = bytes(CHUNK)
            t0 = time.perf_counter()
            for _ in range(size // CHUNK):
                await st.write(block)
            await st.close()
            got = int.from_bytes(await st.readexactly(8), "big")
            out_dt = time.perf_counter() - t0
            if got != size:
                raise RuntimeError("peer sink got %d of %d" % (got, size))
            res = await peer.call("sink", peer=str(h.peer_id), size=size, timeout_s=120)
            return {"to_peer_mb_s": size / 1e6 / out_dt,
                    "from_peer_mb_s": size / 1e6 / (res["ms"] / 1000)}
    finally:
        await peer.kill()


def bench_peer(cmd: list[str], size_mb: int, ping_seconds: float) -> dict[str, float]:
    out = subprocess.run([*cmd, "--bench-self", "--size-mb", str(size_mb),
                          "--ping-seconds", str(ping_seconds)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            res: dict[str, float] = json.loads(line)
            return res
    raise RuntimeError("peer bench failed: %s" % out.stderr[-2000:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=32)
    ap.add_argument("--ping-seconds", type=float, default=2.0)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    results = {
        "pubmote": asyncio.run(bench_pubmote(args.size_mb, args.ping_seconds)),
        "js-libp2p": bench_peer(js_command(), args.size_mb, args.ping_seconds),
        "py-libp2p": bench_peer(py_command(), args.size_mb, args.ping_seconds),
    }
    cross = {k: asyncio.run(bench_cross(k, args.size_mb)) for k in ("js", "py")}
    ours = results["pubmote"]
    print("mesh: Noise + Yamux over loopback TCP, %d MiB on one stream, ping for %g s "
          "(each implementation against itself, one process)" % (args.size_mb,
                                                                  args.ping_seconds))
    print("%-10s %12s %12s" % ("", "MB/s", "pings/s"))
    for name, r in results.items():
        print("%-10s %12.1f %12.0f" % (name, r["throughput_mb_s"], r["pings_per_s"]))
    for peer in ("js-libp2p", "py-libp2p"):
        r = results[peer]
        print("pubmote / %-9s throughput x%.2f, ping rate x%.2f" % (
            peer, ours["throughput_mb_s"] / r["throughput_mb_s"],
            ours["pings_per_s"] / r["pings_per_s"]))
    for k, r in cross.items():
        print("pubmote <-> %s-libp2p on one connection: %.1f MB/s to it, %.1f MB/s from it"
              % (k, r["to_peer_mb_s"], r["from_peer_mb_s"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"self": results, "cross": cross}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
