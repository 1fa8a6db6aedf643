"""Board profiles (boards/*.toml): link, pins, heap budget, how to flash and deploy."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

BOARDS_DIR = Path(__file__).resolve().parents[2] / "boards"
REQUIRED = ("name", "description", "mpy_arch", "heap_budget_bytes", "default_link", "links",
            "flash", "deploy")


def profile_names() -> list[str]:
    return sorted(p.stem for p in BOARDS_DIR.glob("*.toml"))


def load_profile(name: str) -> dict[str, Any]:
    """The profile of board type `name`; ValueError names the known ones if it is unknown."""
    path = BOARDS_DIR / (name + ".toml")
    if not path.is_file():
        raise ValueError("unknown board %r; known boards: %s" % (name, ", ".join(profile_names())))
    with open(path, "rb") as f:
        prof = tomllib.load(f)
    missing = [k for k in REQUIRED if k not in prof]
    if missing:
        raise ValueError("board profile %s lacks %s" % (path, ", ".join(missing)))
    if prof["default_link"] not in prof["links"]:
        raise ValueError("board profile %s: default_link %r is not among its links"
                         % (path, prof["default_link"]))
    return prof


def board_config(profile: dict[str, Any], name: str, link: str | None = None,
                 **overrides: Any) -> dict[str, Any]:
    """The firmware's config (pubmote_config.json) for a board of this profile."""
    link = link or profile["default_link"]
    if link not in profile["links"]:
        raise ValueError("board %s has no %r link (it has: %s)"
                         % (profile["name"], link, ", ".join(profile["links"])))
    cfg: dict[str, Any] = {"name": name, "link": link}
    cfg.update(profile["links"][link])
    cfg.update(overrides)
    return cfg
