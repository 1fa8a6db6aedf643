"""Where a gateway keeps its mesh key by default; cheap to import (the CLI's help shows it)."""

from __future__ import annotations

import os
from pathlib import Path


def default_key_file() -> Path:
    """$XDG_CONFIG_HOME/pubmote/mesh.key (~/.config/pubmote/mesh.key)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "pubmote" / "mesh.key"
