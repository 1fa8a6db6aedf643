"""Updating a fleet of simulated boards (`pubmote update`, the MicroPython unix port running
the firmware, keyed as `pubmote bridge --sim-boards` makes them), against the issue's
targets: N boards updated with a ~20 kB app, canary first (target: all healthy in under
60 s for 10); a broken app (raises at import) and a hanging one (never registers): every
board back on its previous app within --timeout + 30 s, none left without a working app;
a power cut (SIGKILL of the board) at a random point of each of K updates: every board
boots a whole app. The bridge runs in this process; `pubmote update` is the real CLI."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "host"))

from e2e import APPS, bridge_with_boards, wait_until  # noqa: E402


def make_app(folder: Path, tag: str, pad_bytes: int) -> dict[str, bytes]:
    """The tests' good app plus a padding module: about pad_bytes + 0.4 kB in all."""
    folder.mkdir(parents=True)
    (folder / "app.py").write_bytes((APPS / "update_good" / "app.py").read_bytes())
    rnd = random.Random(tag)
    lines = "".join("    %r\n" % "".join(rnd.choice("abcdef") for _ in range(70))
                    for _ in range(pad_bytes // 76))
    (folder / "pad.py").write_text("# padding %s\nDATA = (\n%s)\n" % (tag, lines))
    return {p.name: p.read_bytes() for p in folder.iterdir()}


async def cli(*args: str) -> tuple[int, str]:
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pubmote", "update", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await p.communicate()
    assert p.returncode is not None
    return p.returncode, out.decode()


def states(out: str) -> dict[str, str]:
    s = {}
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 2 and w[0].startswith("sim"):
            s[w[0]] = w[1]
    return s


def whole_app(fs: Path, apps: list[dict[str, bytes]]) -> bool:
    ptr_file = fs / "app.ptr"
    if not ptr_file.exists():
        return True  # the deployed app
    cur = json.loads(ptr_file.read_text())["cur"]
    if not cur:
        return True
    files = {p.name: p.read_bytes() for p in (fs / "apps" / cur).iterdir()
             if p.name != "config.json"}
    return files in apps


async def main(args: argparse.Namespace) -> None:
    logging.disable(logging.WARNING)  # the bridge's rollback warnings: the table says it
    tmp = Path(tempfile.mkdtemp(prefix="pubmote-update-bench-"))
    os.environ["PUBMOTE_CONTROL"] = str(tmp / "bridge.sock")
    a = make_app(tmp / "app_a", "a", args.kb * 1000)
    b = make_app(tmp / "app_b", "b", args.kb * 1000)
    try:
        await _run(args, tmp, a, b)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _run(args: argparse.Namespace, tmp: Path, a: dict[str, bytes],
               b: dict[str, bytes]) -> None:
    size = sum(len(x) for x in a.values())
    names = ["sim%d" % (i + 1) for i in range(args.boards)]
    async with bridge_with_boards(tmp / "sim", args.boards, sim_keys=True) as bridge:
        await wait_until(lambda: all((x := bridge.hub.board(n)) is not None and x.up
                                     for n in names), 120, "the boards to register")
        t0 = time.monotonic()
        code, out = await cli("--app", str(tmp / "app_a"), "--canary", "1", "--all")
        took = time.monotonic() - t0
        healthy = sum(s == "healthy" for s in states(out).values())
        print("update of %d boards, %d-byte app, canary 1: %d/%d healthy in %.1f s "
              "(target < 60 s for 10: %.2f of it)" % (args.boards, size, healthy,
                                                      args.boards, took, took / 60))
        for app, timeout in (("update_broken", 10), ("update_hang", 10)):
            t0 = time.monotonic()
            code, out = await cli("--app", str(APPS / app), "--timeout", str(timeout), "--all")
            took = time.monotonic() - t0
            st = states(out)
            back = sum(s == "rolledback" for s in st.values())
            await wait_until(lambda: all((x := bridge.hub.board(n)) is not None and x.up
                                         for n in names), 60, "the boards to be up")
            whole = sum(whole_app(tmp / "sim" / (n + ".fs"), [a]) for n in names)
            print("%s, --timeout %d: %d/%d boards rolled back in %.1f s (limit %d s); "
                  "%d/%d on a whole app, up" % (app, timeout, back, args.boards, took,
                                                timeout + 30, whole, args.boards))
        board = bridge.fleet.boards[0]  # type: ignore[union-attr]
        rnd = random.Random(11)
        whole_n = healthy_n = 0
        t0 = time.monotonic()
        for i in range(args.cuts):
            job = asyncio.create_task(cli("--app", str(tmp / ("app_b" if i % 2 else "app_a")),
                                          "--timeout", "20", "sim1"))
            await asyncio.sleep(rnd.uniform(0.3, 1.8))
            board.power_off()
            board.start()
            code, out = await job
            healthy_n += code == 0
            whole_n += whole_app(tmp / "sim" / "sim1.fs", [a, b])
        print("power cut at a random point of %d updates: %d/%d boots on a whole app "
              "(%d of the updates still ended healthy) in %.1f s" % (
                  args.cuts, whole_n, args.cuts, healthy_n, time.monotonic() - t0))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=10)
    ap.add_argument("--kb", type=int, default=20, help="the app's size in kB (about)")
    ap.add_argument("--cuts", type=int, default=20, help="updates cut by a power cut")
    asyncio.run(main(ap.parse_args()))
