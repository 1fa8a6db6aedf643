"""Where pubmote finds its own files: the board profiles, the firmware's files and the
codec and node packages it deploys, freezes and simulates. They are package data, found
through importlib.resources, so a checkout and an installed wheel work the same; what is
built goes to the checkout's build/ folder, or to the user's cache outside a checkout."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def package_dir(package: str) -> Path:
    """The folder of an installed package (pubmote_wire, pubmote_node, pubmote_boards,
    pubmote_firmware, pubmote.boards)."""
    d = files(package)
    if not isinstance(d, Path):  # a zipped install: MicroPython and mpy-cross need files
        raise FileNotFoundError("pubmote's package %s is not on the file system (%s); "
                                "install pubmote unzipped" % (package, d))
    return d


def profiles_dir() -> Path:
    """The board profiles, one TOML file per target (boards/ in a checkout)."""
    return package_dir("pubmote_boards")


def firmware_dir() -> Path:
    """The firmware's own files: main.py, manifest.py, frozen/main.py (firmware/)."""
    return package_dir("pubmote_firmware")


def micropython_path() -> list[str]:
    """MICROPYPATH entries that make pubmote_wire and pubmote_node importable on the unix
    port (shared/ and firmware/ in a checkout; site-packages once installed)."""
    out: list[str] = []
    for pkg in ("pubmote_wire", "pubmote_node"):
        parent = str(package_dir(pkg).parent)
        if parent not in out:
            out.append(parent)
    return out


def pico_runner() -> Path:
    """The rp2040js driver script of the emulated Pico."""
    return package_dir("pubmote.boards") / "pico.mjs"


def checkout() -> Path | None:
    """The source checkout pubmote runs from (an editable install), else None."""
    # resolved: a package linked into place (a symlink on the path) still names its checkout
    root = firmware_dir().resolve().parent
    return root if (root / "pyproject.toml").is_file() and (root / "host").is_dir() else None


def build_dir() -> Path:
    """Where builds and caches go: $PUBMOTE_BUILD_DIR, else the checkout's build/, else
    $XDG_CACHE_HOME/pubmote (~/.cache/pubmote)."""
    given = os.environ.get("PUBMOTE_BUILD_DIR")
    if given:
        return Path(given)
    root = checkout()
    if root is not None:
        return root / "build"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pubmote"
