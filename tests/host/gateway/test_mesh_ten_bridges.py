"""Ten `pubmote bridge` processes in a seeded random connected topology, simulated boards
on three: 1,000 messages from SP publishers on five bridges reach the SP subscriber of
every bridge exactly once; then three bridges are killed (SIGKILL) mid-run, and every
message published after the mesh has healed reaches every surviving subscriber once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pynng

from e2e import APPS, free_ports, wait_until
from pubmote.boards.cable import end_process
from pubmote.p2p import KeyPair

N = 10
SEED = 6
EXTRA_EDGES = 4
SIM_BRIDGES = (0, 4, 8)
PUBLISHERS = 5
PHASE1 = 1000
PHASE2 = 200   # the kill happens during this phase
PHASE3 = 300   # after the mesh healed
# messages per second, all publishers together (PUBMOTE_TEN_RATE to try others by hand)
RATE = float(os.environ.get("PUBMOTE_TEN_RATE", "100"))
REALM = "ten"
ROUND_S = 5.0  # how long one probe round may take to reach every subscriber


def topology(rng: random.Random) -> set[tuple[int, int]]:
    """A random spanning tree plus a few random edges: (i, j) with i > j, i dials j."""
    edges = {(i, rng.randrange(i)) for i in range(1, N)}
    while len(edges) < N - 1 + EXTRA_EDGES:
        a, b = rng.sample(range(N), 2)
        edges.add((max(a, b), min(a, b)))
    return edges


def connected(nodes: set[int], edges: set[tuple[int, int]]) -> bool:
    if not nodes:
        return True
    start = next(iter(nodes))
    seen, todo = {start}, [start]
    while todo:
        x = todo.pop()
        for a, b in edges:
            for u, v in ((a, b), (b, a)):
                if u == x and v in nodes and v not in seen:
                    seen.add(v)
                    todo.append(v)
    return seen == nodes


def choose_victims(rng: random.Random, edges: set[tuple[int, int]]) -> list[int]:
    """Three bridges whose loss leaves the others connected (else nothing could heal),
    at least one of them with simulated boards."""
    while True:
        victims = rng.sample(range(N), 3)
        if any(v in SIM_BRIDGES for v in victims) and connected(
                set(range(N)) - set(victims), edges):
            return sorted(victims)


class Sub:
    """A pynng SUB socket on one bridge's SP PUB endpoint: lines with arrival times."""

    def __init__(self, url: str) -> None:
        self.sock = pynng.Sub0(recv_buffer_size=8192, reconnect_time_min=20,
                               reconnect_time_max=100)
        self.sock.subscribe(b"/bench/")
        self.sock.subscribe(b"/test/")
        self.sock.dial(url, block=False)
        self.got: list[tuple[bytes, float]] = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        with contextlib.suppress(pynng.Closed):
            while True:
                line = await self.sock.arecv()
                self.got.append((line, time.time()))

    def lines(self, prefix: bytes) -> list[bytes]:
        return [x for x, _ in self.got if x.startswith(prefix)]

    def close(self) -> None:
        self.task.cancel()
        self.sock.close()


class Pub:
    def __init__(self, url: str) -> None:
        self.sock = pynng.Pub0(send_buffer_size=4096)
        self.sock.dial(url, block=False)

    async def send(self, line: bytes) -> None:
        await self.sock.asend(line)

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def bridges(tmp: Path, edges: set[tuple[int, int]]) -> Iterator[list[dict[str, object]]]:
    keys = [KeyPair.generate() for _ in range(N)]
    # every port of the ten bridges (mesh, SP PUB, SP SUB) distinct: a bridge that finds
    # its port taken by a sibling never joins, and the mesh never forms
    ports = free_ports(3 * N)
    addrs = ["/ip4/127.0.0.1/tcp/%d/p2p/%s" % (ports[i], keys[i].peer_id) for i in range(N)]
    members = [a for k in keys for a in ("--realm-member", str(k.peer_id))]
    procs: list[dict[str, object]] = []
    try:
        for i in range(N):
            kf = tmp / ("gw%d.key" % i)
            kf.write_bytes(keys[i].encode_private())
            kf.chmod(0o600)
            sp_pub, sp_sub = ("tcp://127.0.0.1:%d" % p for p in ports[N + 2 * i:N + 2 * i + 2])
            args = [sys.executable, "-m", "pubmote", "bridge", "--no-view",
                    "--name", "gw%d" % i, "--realm", REALM, *members,
                    "--mesh-key-file", str(kf), "--mesh-listen",
                    "/ip4/127.0.0.1/tcp/%d" % ports[i], "--sp-pub", sp_pub, "--sp-sub", sp_sub]
            for a, b in edges:
                if a == i:
                    args += ["--mesh-peer", addrs[b]]
            if i in SIM_BRIDGES:
                (tmp / ("sim%d" % i)).mkdir()
                args += ["--sim-boards", "1", "--sim-dir", str(tmp / ("sim%d" % i)),
                         "--sim-app", "mesh_app", "--sim-app-dir", str(APPS),
                         "--sim-app-config", json.dumps({"tag": "gw%d" % i, "tick_ms": 250})]
            log = open(tmp / ("gw%d.log" % i), "wb")  # noqa: SIM115 - closed below
            p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            procs.append({"proc": p, "log": log, "sp_pub": sp_pub, "sp_sub": sp_sub})
        yield procs
    finally:
        for d in procs:  # all at once: each cleans up its boards in parallel
            p = d["proc"]
            assert isinstance(p, subprocess.Popen)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for d in procs:
            p = d["proc"]
            assert isinstance(p, subprocess.Popen)
            end_process(p, signal.SIGTERM, grace_s=5)
            d["log"].close()  # type: ignore[attr-defined]


def cpu_s(procs: list[dict[str, object]]) -> float:
    """User + system CPU seconds the bridge processes have used so far."""
    total = 0
    for d in procs:
        p = d["proc"]
        assert isinstance(p, subprocess.Popen)
        with contextlib.suppress(OSError):
            fields = Path("/proc/%d/stat" % p.pid).read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def probe_until_meshed(subs: dict[int, Sub], pubs: dict[int, Pub], tag: str,
                             timeout_s: float) -> int:
    """Send probe rounds until two rounds in a row reach every subscriber from every
    publisher: every path is up and the mesh carries it. Returns the rounds used."""
    deadline = time.monotonic() + timeout_s
    rnd = 0
    full = 0
    while full < 2:
        if time.monotonic() > deadline:
            raise AssertionError("the mesh did not form within %.0f s" % timeout_s)
        rnd += 1
        for k, p in pubs.items():
            await p.send(b"/bench/probe/%s/%d|%d" % (tag.encode(), k, rnd))

        def arrived(r: int = rnd) -> bool:
            return all(b"/bench/probe/%s/%d|%d" % (tag.encode(), k, r) in s.lines(b"/bench/probe/")
                       for s in subs.values() for k in pubs)

        # a round that has not reached everyone within ROUND_S missed a path: try another
        round_end = min(deadline, time.monotonic() + ROUND_S)
        while not arrived() and time.monotonic() < round_end:
            await asyncio.sleep(0.05)
        full = full + 1 if arrived() else 0
    return rnd


async def publish(pubs: dict[int, Pub], phase: str, count: int, on_sent: object = None) -> None:
    """count messages round-robin over the publishers at RATE per second; payload carries
    the send time for latency."""
    t0 = time.monotonic()
    ks = sorted(pubs)
    for n in range(count):
        k = ks[n % len(ks)]
        await pubs[k].send(b"/bench/%s/%d|%d %.6f" % (phase.encode(), k, n, time.time()))
        if callable(on_sent):
            on_sent(n)
        delay = t0 + (n + 1) / RATE - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def received(sub: Sub, phase: str) -> tuple[Counter[int], list[float]]:
    pre = b"/bench/%s/" % phase.encode()
    counts: Counter[int] = Counter()
    lat: list[float] = []
    for line, t in sub.got:
        if line.startswith(pre):
            n_s, ts = line.split(b"|", 1)[1].split(b" ")
            counts[int(n_s)] += 1
            lat.append(t - float(ts))
    return counts, lat


def test_ten_bridges_deliver_everything_and_heal(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    edges = topology(rng)
    victims = choose_victims(rng, edges)
    survivors = [i for i in range(N) if i not in victims]
    publishers = sorted(rng.sample(survivors, PUBLISHERS))
    report: dict[str, object] = {"edges": sorted(edges), "victims": victims,
                                 "publishers": publishers}

    async def run(procs: list[dict[str, object]]) -> None:
        subs = {i: Sub(str(procs[i]["sp_pub"])) for i in range(N)}
        pubs = {i: Pub(str(procs[i]["sp_sub"])) for i in publishers}
        try:
            t0 = time.monotonic()
            report["probe_rounds"] = await probe_until_meshed(subs, pubs, "up", 45)
            report["mesh_formed_s"] = round(time.monotonic() - t0, 1)

            # phase 1: 1,000 messages, every subscriber gets every one exactly once
            cpu0, t1 = cpu_s(procs), time.monotonic()
            await publish(pubs, "p1", PHASE1)
            await wait_until(lambda: all(len(received(s, "p1")[0]) == PHASE1
                                         for s in subs.values()), 30, "phase 1 delivery")
            report["p1_rate_msg_s"] = round(PHASE1 / (time.monotonic() - t1), 1)
            report["p1_cpu_ms_per_msg_per_node"] = round(
                1000 * (cpu_s(procs) - cpu0) / PHASE1 / N, 3)
            await asyncio.sleep(0.5)
            lat: list[float] = []
            for i, s in subs.items():
                counts, ls = received(s, "p1")
                assert set(counts) == set(range(PHASE1)), i
                assert max(counts.values()) == 1, (i, counts.most_common(3))
                lat += ls
            lat.sort()
            report["p1_latency_ms"] = {"p50": round(1000 * statistics.median(lat), 1),
                                       "p99": round(1000 * lat[int(len(lat) * 0.99)], 1)}

            # phase 2: three bridges killed while messages flow
            def kill_at(n: int) -> None:
                if n == PHASE2 // 3:
                    for v in victims:
                        p = procs[v]["proc"]
                        assert isinstance(p, subprocess.Popen)
                        os.kill(p.pid, signal.SIGKILL)
                    report["killed_at_message"] = n

            await publish(pubs, "p2", PHASE2, kill_at)
            live = {i: s for i, s in subs.items() if i not in victims}
            t_heal = time.monotonic()
            report["heal_probe_rounds"] = await probe_until_meshed(live, pubs, "heal", 30)
            report["healed_s"] = round(time.monotonic() - t_heal, 1)
            for i, s in live.items():
                counts, _ = received(s, "p2")
                assert not counts or max(counts.values()) == 1, i  # never twice, even then
            report["p2_delivered_min"] = min(len(received(s, "p2")[0]) for s in live.values())

            # phase 3: after healing, everything reaches every survivor exactly once
            await publish(pubs, "p3", PHASE3)
            await wait_until(lambda: all(len(received(s, "p3")[0]) == PHASE3
                                         for s in live.values()), 30, "phase 3 delivery")
            await asyncio.sleep(0.5)
            for i, s in live.items():
                counts, _ = received(s, "p3")
                assert set(counts) == set(range(PHASE3)) and max(counts.values()) == 1, i
            # the simulated boards' ticks crossed the mesh too, each number once
            for i, s in live.items():
                for g in SIM_BRIDGES:
                    ticks = s.lines(b"/test/gw%d/sim1/tick|" % g)
                    assert ticks, (i, g)
                    assert len(ticks) == len(set(ticks)), (i, g)
            for v in victims:
                p = procs[v]["proc"]
                assert isinstance(p, subprocess.Popen) and p.poll() is not None
        finally:
            for s in subs.values():
                s.close()
            for p in pubs.values():
                p.close()

    with bridges(tmp_path, edges) as procs:
        try:
            asyncio.run(asyncio.wait_for(run(procs), 110))
        except BaseException:
            for i in range(N):  # the bridges' logs say why
                text = (tmp_path / ("gw%d.log" % i)).read_text(errors="replace")
                print("---- gw%d ----\n%s" % (i, text[-3000:]))
            raise
        finally:
            print("ten bridges:", json.dumps(report))
