"""The codec's stub files (shared/pubmote_wire/*.pyi: the host's type checks see the codec
through them, since MicroPython cannot carry annotations) agree with the code: mypy's
stubtest imports each module and compares every stubbed name, argument and default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WIRE = ROOT / "shared" / "pubmote_wire"


def stubbed_modules() -> list[str]:
    # _types.pyi holds the stubs' own aliases: no module behind it
    return sorted("pubmote_wire." + p.stem for p in WIRE.glob("*.pyi") if p.stem != "_types")


def test_every_host_facing_module_has_a_stub() -> None:
    assert {"pubmote_wire." + m for m in ("name", "interest", "data", "lp", "notify", "sp",
                                          "tlv", "framing", "cbor", "errors")} \
        <= set(stubbed_modules())


def test_stubs_match_the_code() -> None:
    env = dict(os.environ, MYPYPATH=str(ROOT / "shared"))
    p = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--ignore-missing-stub",
                        "--mypy-config-file", str(ROOT / "pyproject.toml"),
                        *stubbed_modules()],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
