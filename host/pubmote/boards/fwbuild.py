"""`pubmote firmware build`: MicroPython's rp2 port with pubmote frozen in (firmware/manifest.py).

The MicroPython tree comes from --micropython, else MICROPY_DIR, else the tarball in
`../shared/rp2040/` (beside the repository) unpacked once into the build cache. The result is
cached under a key made of everything that goes in (the tree's identity, the manifest, the
frozen sources, the board, the toolchain's version): a second build with nothing changed
copies the cached files and takes well under a second.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pubmote import procs
from pubmote.boards import files, uf2

CACHE = files.build_dir() / "firmware"
DEFAULT_OUT = CACHE / "pico"
# the MicroPython tarball and the RP2040 boot ROM: ../shared/rp2040 beside a checkout
_CHECKOUT = files.checkout()
SHARED_RP2040 = (_CHECKOUT.parent / "shared" / "rp2040" if _CHECKOUT is not None
                 else files.build_dir() / "rp2040")
TARBALL_NAME = "micropython-1.27.0-rp2-src.tar.xz"
BOOTROM = SHARED_RP2040 / "bootrom-b1.bin"
# The manifest names its sources relative to itself, as laid out in a checkout
# (../shared/pubmote_wire); the build runs on a copy in that layout, made from the
# installed packages. What it freezes, by place in that layout: a change to any of these
# is a new firmware.
MANIFEST_NAME = "firmware/manifest.py"
FROZEN_SOURCES = (("shared/pubmote_wire", "pubmote_wire", ""),
                  ("firmware/pubmote_node", "pubmote_node", ""),
                  ("firmware/frozen", "pubmote_firmware", "frozen"))


# An app frozen beside pubmote (build(apps=...)): its modules go to app/ in the staged
# layout, and a manifest that includes pubmote's freezes them as top-level modules, as a
# user's own manifest would (a frozen app's code stays in flash, not in the board's heap).
# Every build, with apps or without, is given that manifest under one name: cmake keeps the
# manifest's path it was configured with, so one name lets a build with apps and one
# without share a build folder (the second only refreezes and relinks: seconds, not the
# minutes of a cold build)
APP_PLACE = "app"
APP_MANIFEST_NAME = "firmware/manifest_build.py"


def frozen_files(apps: Sequence[Path] = ()) -> list[tuple[str, Path]]:
    """(place in the checkout layout, file) for the manifest and every frozen source,
    then each app module."""
    out = [(MANIFEST_NAME, files.firmware_dir() / "manifest.py")]
    for place, package, sub in FROZEN_SOURCES:
        base = files.package_dir(package) / sub if sub else files.package_dir(package)
        for f in sorted(base.rglob("*.py")):
            out.append((place + "/" + f.relative_to(base).as_posix(), f))
    for f in apps:
        out.append((APP_PLACE + "/" + f.name, f))
    return out


def app_manifest(apps: Sequence[Path]) -> str:
    """The manifest every build is given: pubmote's, and the app modules if any."""
    lines = ["# pubmote's manifest and an app's modules (fwbuild.build(apps=...))",
             'include("manifest.py")']
    lines += ['module("%s", base_path="../%s")' % (f.name, APP_PLACE) for f in apps]
    return "\n".join(lines) + "\n"


def stage_sources(dest: Path, apps: Sequence[Path] = ()) -> Path:
    """Copy the manifest and its sources into dest in the checkout layout; return the path
    of the manifest to build with (pubmote's, and the app modules if any)."""
    shutil.rmtree(dest, ignore_errors=True)
    for place, f in frozen_files(apps):
        (dest / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest / place)
    (dest / APP_MANIFEST_NAME).write_text(app_manifest(apps))
    return dest / APP_MANIFEST_NAME


DEB_TOOLCHAIN = "gcc-arm-none-eabi libnewlib-arm-none-eabi cmake build-essential"
# board -> MicroPython port, BOARD= name, and what a build needs besides the tree
BOARDS: dict[str, tuple[str, str]] = {
    "pico": ("rp2", "RPI_PICO"),
    "pico_w": ("rp2", "RPI_PICO_W"),
    "esp32": ("esp32", "ESP32_GENERIC"),
}
OUTPUTS = ("firmware.uf2", "firmware.bin", "firmware.elf")


class BuildError(Exception):
    """The build cannot run or failed; the message is one line saying what to do."""


class OutputError(BuildError):
    """The output folder cannot be made or written (said before anything is built)."""


def install_line() -> str:
    """The exact command that installs the toolchain on Debian/Ubuntu."""
    return ("apt-get install -y " if os.geteuid() == 0 else "sudo apt-get install -y ") \
        + DEB_TOOLCHAIN


def check_toolchain() -> str:
    """The ARM compiler's version line; BuildError with the install line if anything is
    missing."""
    missing = [t for t in ("arm-none-eabi-gcc", "cmake", "make", "cc") if not shutil.which(t)]
    if not missing and not Path("/usr/lib/arm-none-eabi/include/stdio.h").exists() \
            and not _newlib_found():
        missing.append("newlib (libnewlib-arm-none-eabi)")
    if missing:
        raise BuildError("missing toolchain (%s); run: %s" % (", ".join(missing), install_line()))
    out = subprocess.run(["arm-none-eabi-gcc", "--version"], capture_output=True, text=True,
                         check=False)
    return out.stdout.splitlines()[0] if out.stdout else "arm-none-eabi-gcc"


def _newlib_found() -> bool:
    p = subprocess.run(["arm-none-eabi-gcc", "-print-file-name=libc.a"], capture_output=True,
                       text=True, check=False)
    return os.path.isabs(p.stdout.strip())


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_tree(explicit: str | None, progress: Callable[[str], None]) -> tuple[Path, str]:
    """The MicroPython tree to build from and a string identifying its contents.

    A directory given with --micropython or MICROPY_DIR is used in place (identified by its
    path and its version and port headers); else the tarball beside the repository is
    unpacked once into build/firmware/src-<sha>/ (identified by its SHA-256)."""
    given = explicit or os.environ.get("MICROPY_DIR")
    if given:
        tree = Path(given).resolve()
        if not (tree / "py" / "mpconfig.h").is_file():
            raise BuildError("%s is not a MicroPython source tree (no py/mpconfig.h); pass "
                             "--micropython DIR or set MICROPY_DIR to a micropython checkout"
                             % tree)
        h = hashlib.sha256(str(tree).encode())
        for rel in ("py/mpconfig.h", "ports/rp2/mpconfigport.h", "ports/rp2/CMakeLists.txt"):
            if (tree / rel).is_file():
                h.update((tree / rel).read_bytes())
        return tree, "dir:" + h.hexdigest()
    tarball = SHARED_RP2040 / TARBALL_NAME
    if not tarball.is_file():
        raise BuildError("no MicroPython tree: pass --micropython DIR or set MICROPY_DIR (a "
                         "micropython checkout after `make -C ports/rp2 submodules`), or put "
                         "%s in %s" % (TARBALL_NAME, SHARED_RP2040))
    sha = _sha256_file(tarball)
    dest = CACHE / ("src-" + sha[:12])
    stamp = dest / ".unpacked"
    top = dest / TARBALL_NAME.replace("-src.tar.xz", "")
    if not stamp.exists():
        with _locked("unpack"):
            if not stamp.exists():  # another process may have unpacked it meanwhile
                progress("unpacking %s into %s" % (tarball.name, dest))
                if dest.exists():
                    shutil.rmtree(dest)
                dest.mkdir(parents=True)
                with tarfile.open(tarball) as tf:
                    tf.extractall(dest, filter="data")
                stamp.write_text(sha)
    return top / "micropython", "tar:" + sha


def inputs_key(board: str, tree_id: str, toolchain: str, apps: Sequence[Path] = ()) -> str:
    """SHA-256 over everything a firmware is made from (without apps, what it has always
    been: the product firmware's cache entries stay valid)."""
    h = hashlib.sha256()
    for part in (board, tree_id, toolchain, sys.platform):
        h.update(part.encode() + b"\0")
    staged = frozen_files(apps)
    h.update(staged[0][1].read_bytes())  # the manifest
    for place, f in staged[1:]:
        h.update(place.encode() + b"\0" + f.read_bytes() + b"\0")
    if apps:
        h.update(app_manifest(apps).encode())
    return h.hexdigest()


PROGRESS_S = 10.0  # how often a long step says how far it got
_PERCENT = re.compile(rb"\[ *(\d+)%\]")


def _percent(log: Path, start: int) -> int | None:
    """The last cmake progress figure ("[ 42%]") the step wrote to its log after start."""
    try:
        with open(log, "rb") as f:
            f.seek(max(start, os.path.getsize(log) - 4096))
            found = _PERCENT.findall(f.read())
    except OSError:
        return None
    return int(found[-1]) if found else None


def _run(cmd: list[str], log: Path, progress: Callable[[str], None], what: str,
         cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    progress("%s ..." % what)
    t0 = time.monotonic()
    with open(log, "ab") as f:
        f.write(("\n$ %s\n" % " ".join(cmd)).encode())
        f.flush()
        start = f.tell()
        p: subprocess.Popen[bytes] | None = None
        try:
            # a process group of its own: an interrupted build ends make and every
            # compiler it started, whoever sent the interrupt
            with procs.interrupt_after():
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd,
                                     env=env, start_new_session=True)
            while True:
                try:
                    p.wait(timeout=PROGRESS_S)
                    break
                except subprocess.TimeoutExpired:
                    pct = _percent(log, start)
                    progress("%s ... %s%.0f s" % (what, "%d%%, " % pct if pct is not None
                                                  else "", time.monotonic() - t0))
        except BaseException:
            if p is None:
                raise
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            raise
    if p.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BuildError("%s failed (exit %d); last lines of %s:\n%s"
                         % (what, p.returncode, log, "\n".join(tail)))
    progress("%s done in %.0f s" % (what, time.monotonic() - t0))


def _check_out(out: Path) -> None:
    """OutputError now, before a minute of building, if the output folder cannot be made
    or written; what this check made is removed again (nothing half-built stays)."""
    made: list[Path] = []
    try:
        missing = [p for p in [out, *out.parents] if not p.exists()]
        for p in reversed(missing):
            p.mkdir()
            made.append(p)
        probe = out / (".write-check.%d" % os.getpid())
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise OutputError("%s: the folder cannot be made or written: %s"
                          % (out, e.strerror or e)) from None
    finally:
        for p in reversed(made):
            with contextlib.suppress(OSError):
                p.rmdir()


def build(board: str = "pico", *, micropython: str | None = None, out: Path | None = None,
          apps: Sequence[Path] = (), progress: Callable[[str], None] = print) -> Path:
    """Build (or take from the cache) the firmware for `board`; returns the folder that
    holds firmware.uf2 and firmware.bin. BuildError says what is missing.

    apps: .py files frozen beside pubmote as top-level modules (an app's code in flash
    instead of the board's heap); such a firmware goes to build/firmware/BOARD+APPS
    unless `out` says otherwise, never over the plain one.

    One build at a time per checkout: a second caller of the same build (make test starts
    it beside the tests that need it) waits for the first, then finds its result in the
    cache; what is missing is said at once, without waiting."""
    if board not in BOARDS:
        raise BuildError("unknown board %r (known: %s)" % (board, ", ".join(BOARDS)))
    port, mp_board = BOARDS[board]
    apps = [Path(a).resolve() for a in apps]
    for a in apps:
        if a.suffix != ".py" or not a.is_file():
            raise BuildError("app module %s is not a .py file" % a)
    default_out = CACHE / (board + "".join("+" + a.stem for a in apps))
    out = (out or default_out).resolve()
    _check_out(out)
    if port == "esp32":
        # nothing half-built: say what is missing before anything runs
        if not os.environ.get("IDF_PATH"):
            raise BuildError("the esp32 build needs ESP-IDF (v5.2-5.4, what MicroPython 1.27 "
                             "supports): install it and source its export.sh so IDF_PATH is "
                             "set, then run this again")
    toolchain = check_toolchain()
    tree, tree_id = resolve_tree(micropython, progress)
    port_dir = tree / "ports" / port
    if not (port_dir / "boards" / mp_board).is_dir():
        raise BuildError("%s has no board %s (a pruned tree? pass --micropython DIR with a "
                         "full micropython checkout)" % (port_dir, mp_board))
    if port == "rp2" and not (tree / "lib" / "pico-sdk" / "README.md").is_file():
        raise BuildError("%s has no lib/pico-sdk: run `make -C %s submodules` first"
                         % (tree, port_dir))
    if board == "pico_w" and not (tree / "lib" / "cyw43-driver" / "src").is_dir():
        raise BuildError("the pico_w build needs lib/cyw43-driver and lib/lwip, which %s lacks: "
                         "pass --micropython DIR with a checkout after `make -C ports/rp2 "
                         "BOARD=RPI_PICO_W submodules`" % tree)
    key = inputs_key(board, tree_id, toolchain, apps)
    cached = CACHE / "cache" / key[:16]
    with _locked("build"):
        _build_once(board, tree, port_dir, mp_board, key, cached, progress, apps)
    out.mkdir(parents=True, exist_ok=True)
    if _read(out / "inputs.sha256") != _read(cached / "inputs.sha256"):
        for f in (*OUTPUTS, "inputs.sha256"):  # inputs.sha256 last: it marks a whole copy
            tmp = out / (".%s.%d.tmp" % (f, os.getpid()))
            shutil.copy2(cached / f, tmp)
            os.replace(tmp, out / f)  # an emulator starting now reads the old or the new
    progress("wrote %s and %s" % (out / "firmware.uf2", out / "firmware.bin"))
    return out


@contextlib.contextmanager
def _locked(what: str) -> Iterator[None]:
    """Held by one process of this checkout at a time (the kernel drops it on exit)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / (".%s.lock" % what), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_once(board: str, tree: Path, port_dir: Path, mp_board: str, key: str,
                cached: Path, progress: Callable[[str], None], apps: Sequence[Path]) -> None:
    port = port_dir.name
    if all((cached / f).is_file() for f in OUTPUTS):
        progress("firmware for %s is up to date (inputs %s)" % (board, key[:16]))
    else:
        t0 = time.monotonic()
        CACHE.mkdir(parents=True, exist_ok=True)
        log = CACHE / ("build-%s.log" % board)
        log.write_text("pubmote firmware build %s, inputs %s\n" % (board, key))
        progress("building MicroPython %s (BOARD=%s) with pubmote frozen in; log: %s"
                 % (port, mp_board, log))
        jobs = str(os.cpu_count() or 2)
        # MicroPython names its version after `git describe` of the tree; the unpacked
        # tarball sits inside this repository's checkout, whose commit is not MicroPython's
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tree.parent.parent))
        _run(["make", "-j", jobs, "-C", str(tree / "mpy-cross")], log, progress,
             "building mpy-cross", env=env)
        # the build folder depends on the paths cmake is configured with and keeps (the
        # port's Makefile configures a folder once): another tree, another python3 on PATH
        # (a venv since removed) or another manifest path gets another folder; the
        # manifest's path is the same with apps or without (APP_MANIFEST_NAME)
        manifest = stage_sources(CACHE / "sources", apps)
        configured = "%s|%s|%s" % (tree, shutil.which("python3") or "", manifest)
        obj = CACHE / ("obj-%s-%s" % (board, hashlib.sha256(configured.encode()).hexdigest()[:8]))
        cmake_args = "-DMICROPY_FROZEN_MANIFEST=%s" % manifest
        if port == "rp2":
            # no picotool: pico-sdk 2.x would build it (or clone it) only to write the UF2
            # and sign RP2350 images; the RP2040's UF2 is written below from firmware.bin
            cmake_args += " -DPICO_NO_PICOTOOL=1"
        _run(["make", "-j", jobs, "-C", str(port_dir), "BOARD=" + mp_board, "BUILD=" + str(obj),
              "CMAKE_ARGS=" + cmake_args], log, progress, "building the firmware", env=env)
        tmp = cached.with_name(cached.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in OUTPUTS:
            if f == "firmware.uf2" and port == "rp2":
                (tmp / f).write_bytes(uf2.from_bin((obj / "firmware.bin").read_bytes()))
            else:
                shutil.copy2(obj / f, tmp / f)
        (tmp / "inputs.sha256").write_text(key + "\n")
        shutil.rmtree(cached, ignore_errors=True)
        tmp.rename(cached)  # whole or not at all: a killed build leaves no cache entry
        progress("built in %.0f s" % (time.monotonic() - t0))
