"""A sleeping board against the issue's target: a simulated board (the MicroPython unix
port running the firmware; --kind pico: an emulated Pico, the real rp2 firmware in
rp2040js, whose machine.deepsleep ends in a watchdog reset and a power-on from its flash
chip) deep-sleeping --sleep-s and awake --awake-ms in a loop for --cycles cycles
(node.sleep: its process ends and is started again, so nothing survives in its RAM),
commands sent to it by an SP publisher (pynng) at random times: every one
delivered at its next wake, 0 lost (docs/protocols/sleep.md). Prints commands sent,
delivered, lost, twice, out of order, a wake late, and the delivery delay after the wake
(by the board's clock, from its registration to the command in the app) of the commands
sent while it slept. The bridge runs in this process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pynng

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "host"))

from e2e import (  # noqa: E402
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    sp_connected,
    wait_until,
)

AWAKE = b"/sleepy/sim1/awake|"
GOT = b"/sleepy/sim1/got|"


async def collect(sock: pynng.Sub0, lines: list[tuple[float, bytes]]) -> None:
    with contextlib.suppress(pynng.Closed):
        while True:
            line = await sock.arecv()
            lines.append((time.monotonic(), line))


def of(lines: list[tuple[float, bytes]], prefix: bytes) -> list[tuple[float, bytes]]:
    return [(t, x) for t, x in lines if x.startswith(prefix)]


BOOT_S = {"unix": 60, "pico": 300}  # a board's first registration, on a loaded machine


async def run(cycles: int, sleep_s: float, awake_ms: int, seed: int, kind: str,
              asleep_only: bool) -> int:
    urls: dict[str, Any] = {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
                            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}
    extra = {"sleep_ms": int(sleep_s * 1000), "awake_ms": awake_ms}
    print("sleeping board%s: %d cycles of %.1f s asleep / %d ms awake, commands at random "
          "times%s (seed %d)" % (" (emulated Pico)" if kind == "pico" else "", cycles, sleep_s,
                                 awake_ms, " while it sleeps" if asleep_only else "", seed),
          flush=True)
    with tempfile.TemporaryDirectory(prefix="pubmote-bench-sleep-") as tmp:
        async with bridge_with_boards(Path(tmp), 1, app="sleepy_app", extra=extra,
                                      sim_kind=kind, **urls) as bridge:
            await boards_registered(bridge, ["sim1"], BOOT_S[kind])
            lines: list[tuple[float, bytes]] = []
            sock = pynng.Sub0(recv_buffer_size=4096)
            sock.dial(urls["sp_pub"][0], block=False)
            sock.subscribe(b"/sleepy/sim1/")
            task = asyncio.get_running_loop().create_task(collect(sock, lines))
            pub = Publisher(urls["sp_sub"][0])
            try:
                await sp_connected(bridge)
                n0 = len(of(lines, AWAKE))
                await wait_until(lambda: len(of(lines, AWAKE)) > n0, BOOT_S[kind],
                                 "the board's wake")
                rng = random.Random(seed)
                sent: list[tuple[float, bytes, bool]] = []  # time, command, sent asleep
                t_start = time.monotonic()
                k = 0
                while len(of(lines, AWAKE)) < n0 + 1 + cycles:
                    await asyncio.sleep(rng.uniform(0.05, max(0.1, sleep_s * 0.6)))
                    b = bridge.hub.board("sim1")
                    if asleep_only and (b is None or not b.asleep):
                        continue
                    cmd = b"c%d" % k
                    k += 1
                    sent.append((time.monotonic(), cmd, b is not None and b.asleep))
                    await pub.send(b"/sleepy/sim1/cmd|" + cmd)
                with contextlib.suppress(AssertionError):
                    await wait_until(lambda: len(of(lines, GOT)) >= len(sent),
                                     sleep_s * 3 + BOOT_S[kind] / 2, "every command")
                await asyncio.sleep(min(sleep_s, 2.0))  # a command twice would show by now
                elapsed = time.monotonic() - t_start
                report(sent, lines, bridge.hub.stats(), elapsed)
            finally:
                task.cancel()
                sock.close()
                pub.close()
    return 0


def report(sent: list[tuple[float, bytes, bool]], lines: list[tuple[float, bytes]],
           c: dict[str, int], elapsed: float) -> None:
    got = of(lines, GOT)
    cmds = [x[len(GOT):].split(b" ") for _, x in got]
    names = [w[0] for w in cmds]
    want = [cmd for _, cmd, _ in sent]
    delivered = len(set(names) & set(want))
    twice = len(names) - len(set(names))
    order = [want.index(n) for n in names if n in want]
    out_of_order = sum(1 for a, b in itertools.pairwise(order) if b < a)
    wakes = [t for t, _ in of(lines, AWAKE)]
    at = {n: t for (t, _), n in zip(got, names, strict=True)}
    late = 0
    delays = []
    for t_sent, cmd, asleep in sent:
        after = [t for t in wakes if t > t_sent]
        if cmd in at and len(after) >= 2 and at[cmd] > after[1]:
            late += 1
        if asleep and cmd in at:
            w = cmds[names.index(cmd)]
            if len(w) > 1:
                delays.append(int(w[1]))
    print("wakes seen %d in %.0f s; commands sent %d (%d while asleep), delivered %d, "
          "lost %d, twice %d, out of order %d, a wake late %d" % (
              len(wakes) - 1, elapsed, len(sent), sum(1 for s in sent if s[2]), delivered,
              len(want) - delivered, twice, out_of_order, late))
    if delays:
        delays.sort()
        print("delivery delay after wake (board's clock, registration -> app), commands "
              "sent while asleep: median %d ms, p95 %d ms, max %d ms (n=%d)" % (
                  statistics.median(delays), delays[int(0.95 * (len(delays) - 1))],
                  delays[-1], len(delays)))
    else:
        print("delivery delay after wake: no command was sent while the board slept")
    print("bridge: sleeps %d, wakes %d, held %d, requeued %d, notify rounds again %d, "
          "dropped %d, expired %d" % (
              c["sleeps"], c["wakes"], c["sleep_queued"], c["sleep_requeued"],
              c["sleep_retried"], c["sleep_dropped"], c["sleep_expired"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=100, help="sleep/wake cycles (default 100)")
    ap.add_argument("--sleep-s", type=float, default=10.0,
                    help="seconds asleep per cycle (default 10)")
    ap.add_argument("--awake-ms", type=int, default=300,
                    help="ms awake per cycle, from registration (default 300)")
    ap.add_argument("--seed", type=int, default=31, help="the command times' random seed")
    ap.add_argument("--quick", action="store_true",
                    help="3 cycles of 1 s asleep: for seeing that it runs, not for figures")
    ap.add_argument("--kind", choices=("unix", "pico"), default="unix",
                    help="the board: unix (the MicroPython unix port, default) or pico (an "
                         "emulated Pico: `pubmote firmware build --board pico` first; each "
                         "wake a whole boot of the emulator)")
    ap.add_argument("--asleep-only", action="store_true",
                    help="send commands only while the bridge holds the board asleep (the "
                         "default with --kind pico: an emulated board on a loaded host takes "
                         "about a command a second, and one arriving while it gets ready to "
                         "sleep calls the sleep off, so commands at random times can keep it "
                         "awake for good)")
    args = ap.parse_args()
    if args.quick:
        args.cycles, args.sleep_s = 3, 1.0
    logging.basicConfig(level=logging.WARNING)
    return asyncio.run(run(args.cycles, args.sleep_s, args.awake_ms, args.seed, args.kind,
                           args.asleep_only or args.kind == "pico"))


if __name__ == "__main__":
    sys.exit(main())
