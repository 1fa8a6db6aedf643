"""An app folder made into an update: its files in one byte string (in name order), the
SHA-256 of it, and the manifest a board checks it against (JSON, signed per board by the
producer). A folder that cannot be one is a PackageError with the reason in one line."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SEGMENT_BYTES = 768  # content per segment: a Data of it fits the board's 1 kB packets
MAX_BYTES = 256 * 1024
SUFFIXES = (".py", ".mpy", ".json")


class PackageError(ValueError):
    """The folder cannot be an update."""


class AppPackage:
    """files: [(name, bytes)], the app module's name, the config keys it brings."""

    def __init__(self, files: list[tuple[str, bytes]], app: str,
                 config: dict[str, Any] | None = None) -> None:
        self.files = sorted(files)
        self.config = dict(config or {})
        self.config["app"] = app
        self.blob = b"".join(data for _, data in self.files)
        self.sha = hashlib.sha256(self.blob).hexdigest()
        # unique per roll-out (a board never stages over the folder it runs from, nor
        # refuses the same app sent again): 32 random bits, not a clock, which two roll-outs
        # within one tick or a wrapped counter would share
        self.version = self.sha[:8] + os.urandom(4).hex()

    @property
    def segments(self) -> int:
        return max(1, -(-len(self.blob) // SEGMENT_BYTES))

    def segment(self, i: int) -> bytes:
        return self.blob[i * SEGMENT_BYTES:(i + 1) * SEGMENT_BYTES]

    def manifest(self, timeout_s: float, grace_s: float) -> bytes:
        """What the board checks the update against (the producer signs it per board)."""
        return json.dumps({
            "v": self.version, "files": [[n, len(d)] for n, d in self.files],
            "size": len(self.blob), "sha": self.sha, "seg": SEGMENT_BYTES,
            "n": self.segments, "config": self.config, "timeout_s": timeout_s,
            "grace_s": grace_s}, separators=(",", ":")).encode()


def app_module(names: list[str], wanted: str | None) -> str:
    """The module the board runs: `app` from --config, else app.py's, else the only
    module; PackageError when that cannot be told or is missing."""
    modules = sorted({n.rsplit(".", 1)[0] for n in names if not n.endswith(".json")})
    if wanted:
        if wanted not in modules:
            raise PackageError("app=%s: no %s.py or %s.mpy in the folder (it has %s)"
                               % (wanted, wanted, wanted, ", ".join(modules) or "none"))
        return wanted
    if "app" in modules:
        return "app"
    if len(modules) == 1:
        return modules[0]
    raise PackageError("%d modules (%s) and no app.py: say which runs with --config "
                       "app=NAME" % (len(modules), ", ".join(modules)))


def read_app_dir(path: str, config: dict[str, Any] | None = None) -> AppPackage:
    """The update a folder holds: its .py, .mpy and .json files (no subfolders)."""
    p = Path(path)
    if not p.is_dir():
        raise PackageError("--app %s: %s" % (path, "not a folder" if p.exists()
                                             else "no such folder"))
    files: list[tuple[str, bytes]] = []
    total = 0
    for entry in sorted(os.scandir(p), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            raise PackageError("--app %s: holds a folder (%s); an app is a flat folder of "
                               "modules" % (path, entry.name))
        if not entry.name.endswith(SUFFIXES) or entry.name == "config.json":
            raise PackageError("--app %s: %s is not a .py, .mpy or .json file (config "
                               "goes in --config KEY=VALUE)" % (path, entry.name))
        try:
            data = Path(entry.path).read_bytes()
        except OSError as e:
            raise PackageError("--app %s: %s cannot be read (%s)"
                               % (path, entry.name, e.strerror or e)) from None
        total += len(data)
        files.append((entry.name, data))
    if not files:
        raise PackageError("--app %s: no .py or .mpy files in it" % path)
    if total > MAX_BYTES:
        raise PackageError("--app %s: %d bytes, more than an update takes (%d)"
                           % (path, total, MAX_BYTES))
    cfg = dict(config or {})
    app = app_module([n for n, _ in files], cfg.pop("app", None))
    return AppPackage(files, app, cfg)
