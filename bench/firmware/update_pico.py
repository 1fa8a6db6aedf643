"""`pubmote update` to one emulated Pico (make bench): the real rp2 firmware with pubmote
frozen in, in rp2040js, its UART0 at 115200 baud on a pty to a bridge run in this process
(`pubmote bridge --sim-boards 1 --sim-kind pico`, keyed); `pubmote update` is the real CLI.
An app of about 20 kB (the update tests' good app and a padding module) is sent; the board
times the transfer on its own clock (from its first segment Interest to its last segment
written; the emulator's clock steady, pico.mjs --steady-clock, so that an emulator slower
than real time on a loaded machine does not count, but the board's own work, its flash
writes included, does) and reports it with its updater's heap peak in its `staged`
report. Twice: the line waiting while the flash erases (as with flow control), then
losing what arrives meanwhile (pico.mjs --overrun, as a real Pico's UART without flow
control). Target: the app's bytes per second at least 0.7 of the line's
limit, 115200 baud / 10 bits per byte = 11,520 B/s.

    python bench/firmware/update_pico.py [--kb 20] [--quick]

--quick: a 6 kB app (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "host"))
sys.path.insert(0, str(ROOT / "bench" / "gateway"))
from update import cli, make_app, states  # noqa: E402

from e2e import boards_registered, bridge_with_boards, wait_until  # noqa: E402
from pubmote.boards import fwbuild  # noqa: E402
from pubmote.boards.emu import UART_BAUD  # noqa: E402
from pubmote_wire import data, framing  # noqa: E402

BOOT_S = 300
TARGET = 0.7
REPORT = re.compile(r"heap \+(\d+) B; (\d+) B in (\d+) ms")


def segment_on_the_line(board: str, version: str, final: int) -> tuple[int, int]:
    """A full segment's content bytes and its bytes on the UART: the Data the bridge sends
    (name, FinalBlockId, DigestSha256), COBS- and CRC-framed."""
    from pubmote.gateway.update.package import SEGMENT_BYTES
    from pubmote_wire import name
    from pubmote_wire.signature import DIGEST

    nm = (name.from_uri("/pubmote/update") + name.generic(board.encode())
          + name.generic(version.encode()) + name.generic(b"s") + name.segment(0))
    pkt = data.encode(nm, bytes(SEGMENT_BYTES), freshness_ms=0, signer=DIGEST,
                      final_block_id=name.segment(final))
    return SEGMENT_BYTES, len(framing.encode(pkt))


async def run(tmp: Path, kb: int) -> None:
    apps = [tmp / "app_a", tmp / "app_b"]
    size = sum(len(b) for b in make_app(apps[0], "a", kb * 1000).values())
    make_app(apps[1], "b", kb * 1000)
    async with bridge_with_boards(tmp / "sim", 1, sim_keys=True, sim_kind="pico") as bridge:
        await boards_registered(bridge, ["sim1"], BOOT_S)
        # its clock steady (pico.mjs --steady-clock): what it times leaves out the host's
        # slowness (an emulator slower than real time, a loaded machine)
        board = bridge.fleet.boards[0]  # type: ignore[union-attr]
        board.steady_clock = True
        await power_cycle(bridge, board)
        print("pubmote update to one emulated Pico (rp2 firmware, rp2040js), UART0 at %d "
              "baud: a %s-byte app" % (UART_BAUD, format(size, ",")))
        await one_update(bridge, apps[0], "the line waits while the flash is busy, as "
                         "with flow control")
        # the same board, its UART now losing what arrives during a flash erase (its
        # interrupts off) beyond the RX FIFO's 32 bytes, as a real Pico's without flow
        # control
        board.overrun = True
        await power_cycle(bridge, board)
        await one_update(bridge, apps[1], "no flow control: bytes arriving during an "
                         "erase lost, their segment fetched again")


async def power_cycle(bridge: Any, board: Any) -> None:
    before = bridge.hub.boards["sim1"].boot
    board.power_off()
    board.start()
    await wait_until(lambda: bridge.hub.boards["sim1"].boot != before
                     and not bridge.hub.boards["sim1"].down, BOOT_S, "sim1 to boot again")
    await asyncio.sleep(3)  # its registration settled


async def one_update(bridge: Any, app: Path, how: str) -> None:
    t0 = time.monotonic()
    _, out = await cli("--app", str(app), "--timeout", "120", "sim1")
    wall = time.monotonic() - t0
    u = bridge.control.producer.updates["sim1"]
    m = REPORT.search(u.heap)
    print("%s:" % how)
    print("  %d segments, %d fetched again; %s (%.0f s of wall time, the emulator's pace)"
          % (u.package.segments, u.served - u.package.segments, states(out).get("sim1", "?"),
             wall))
    if m is None:
        print("  no transfer figures: the board's staged report said %r" % u.heap)
        return
    heap, sent, ms = int(m.group(1)), int(m.group(2)), int(m.group(3))
    seg, on_line = segment_on_the_line("sim1", u.package.version, u.package.segments - 1)
    limit = UART_BAUD / 10
    rate = 1000.0 * sent / ms
    print("  transfer on the board's clock (first segment Interest to last segment written): "
          "%s B in %d ms = %.0f B/s of app" % (format(sent, ","), ms, rate))
    print("  line's limit %d baud / 10 bits = %s B/s; a %d-byte segment is %d bytes on the "
          "line (its NDN Data, COBS and CRC framing): at most %.2f of it is app"
          % (UART_BAUD, format(int(limit), ","), seg, on_line, seg / on_line))
    print("  rate / limit = %.2f (target >= %.1f); of the framed limit %.2f"
          % (rate / limit, TARGET, rate / (limit * seg / on_line)))
    print("  updater heap peak on the Pico: +%s B (gc.mem_alloc after gc.collect, every 8 "
          "segments, above the heap before the updater was loaded)" % format(heap, ","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=int, default=20, help="the app's size in kB (about)")
    ap.add_argument("--quick", action="store_true", help="a 6 kB app")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    fwbuild.build("pico", progress=lambda line: None)
    tmp = Path(tempfile.mkdtemp(prefix="pubmote-update-pico-"))
    os.environ["PUBMOTE_CONTROL"] = str(tmp / "bridge.sock")
    try:
        asyncio.run(run(tmp, 6 if args.quick else args.kb))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
