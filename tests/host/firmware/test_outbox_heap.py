"""The outbox on a board whose heap is smaller than its bounds (firmware outbox.py on the
MicroPython unix port, 64 kB heap): bounds set for a long outage (a 10-minute one at 200 ms
is 3,000 readings, ~390 kB of heap on this port) must not end in a MemoryError in the app's
publish; the heap is then the bound, the oldest dropped and counted, the newest held in
order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import asyncio, gc
from pubmote_node.outbox import Outbox

class Session:
    connected = False

class Node:
    def __init__(self):
        self.config = {"outbox_len": 100000, "outbox_bytes": 100000000}
        self.counters = {"soft_full": 0}
        self.session = Session()

N = 4000

async def outage(ob):
    for i in range(N):
        ob.put("/pubmote/demo/b1/temperature", ("%06d" % i).encode() + bytes(50), i)
        if i % 50 == 0:
            await asyncio.sleep(0)

node = Node()
ob = Outbox(node, None)
asyncio.run(outage(ob))
held = [int(ob._q[k + 1][:6]) for k in range(0, len(ob._q), 2)]
print("held", len(ob), "dropped", node.counters["outbox_dropped"],
      "newest in order", held == list(range(N - len(held), N)), "free", gc.mem_free())
"""


def _micropython(heap: str, *args: str, cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """The venv's MicroPython unix port with the firmware and the codec on its path."""
    path = [".frozen", str(ROOT / "firmware"), str(ROOT / "shared")]
    return subprocess.run([str(Path(sys.executable).parent / "micropython"), "-X",
                           "heapsize=" + heap, *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, MICROPYPATH=":".join(path)),
                          cwd=cwd)


def test_bounds_beyond_the_heap_drop_the_oldest_instead_of_failing() -> None:
    p = _micropython("64k", "-c", SCRIPT)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    words = out.split()
    held, dropped = int(words[words.index("held") + 1]), int(words[words.index("dropped") + 1])
    assert "newest in order True" in out, out
    # every message held or counted; the heap held some hundreds of them, and kept some
    # of itself free for the app
    assert held + dropped == 4000 and held >= 100 and dropped > 0, out
    assert int(words[words.index("free") + 1]) >= 4096, out


def test_the_outbox_heap_bench_runs_on_the_unix_port(tmp_path: Path) -> None:
    """bench/firmware/outbox_heap.py (what bench/firmware/outbox_pico.py runs on the
    emulated Pico) on the unix port: every figure printed, the 64 readings replayed."""
    p = _micropython("256k", str(ROOT / "bench" / "firmware" / "outbox_heap.py"),
                     str(tmp_path / "outbox"), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    figures = dict(line.split()[1:] for line in p.stdout.splitlines()
                   if line.startswith("BENCH outbox_heap."))
    assert sorted(figures) == ["outbox_heap.%s" % k for k in (
        "durable_64", "durable_empty", "node", "ram_64", "ram_empty", "replayed")], out
    assert figures["outbox_heap.replayed"] == "64", out
    # 64 readings held in RAM cost heap
    assert int(figures["outbox_heap.ram_64"]) > int(figures["outbox_heap.ram_empty"]), out
