"""Run every tests/shared test file on the MicroPython runtimes and count the results.

Runtimes: the unix port (64-bit) under -X heapsize=64k, from source and from .mpy files
compiled by mpy-cross; the 32-bit WebAssembly MicroPython under node, from source and from
.mpy. CPython runs the same files under pytest (make test does both). Exit status is
non-zero if any test fails, any file dies before reporting, or a runtime runs no tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "shared"
TESTS = ROOT / "tests" / "shared"
VECTORS = ROOT / "tests" / "vectors"
RESULT = re.compile(r"^RESULT (\S+) (\S+) passed=(\d+) failed=(\d+)", re.M)
TIMEOUT_S = 300


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", help="only test files whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every runtime's full output")
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
    runs = [
        ("micropython unix 64-bit, heap %s, source" % args.heap, lambda: run_unix(SHARED, files, args.heap)),
        ("micropython unix 64-bit, heap %s, .mpy" % args.heap, lambda: run_unix(mpy, files, args.heap)),
        ("micropython wasm 32-bit, source", lambda: run_wasm(SHARED, files)),
        ("micropython wasm 32-bit, .mpy", lambda: run_wasm(mpy, files)),
    ]
    bad = 0
    for label, fn in runs:
        text = fn()
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
