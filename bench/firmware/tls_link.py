"""TLS link heap benchmark: what a WiFi board's link to the bridge costs in clear and with
TLS (the gateway's certificate as CA, or a pinned fingerprint), on the MicroPython unix
port (64-bit) against the real bridge's --tcp face: the MicroPython heap and the C heap
(mbedTLS) after the link opens, against the plaintext link from the same run."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "firmware" / "tls_heap.py"
SHIM = ROOT / "bench" / "firmware" / "malloc_count.c"
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "bench" / "firmware"))

from run import compile_tree  # noqa: E402

from pubmote.core.tlscert import board_settings, fingerprint, load_cert, make_gateway_cert  # noqa: E402
from pubmote.gateway.bridge import Bridge  # noqa: E402
from pubmote.gateway.config import load_config  # noqa: E402


def shim(tmp: Path) -> str | None:
    """The malloc counter compiled for LD_PRELOAD, or None where there is no C compiler."""
    out = tmp / "malloc_count.so"
    p = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(SHIM)],
                       capture_output=True, text=True)
    return str(out) if p.returncode == 0 else None


async def measure(cfg: dict[str, object], preload: str | None, tmp: Path) -> dict[str, int]:
    # the config goes in a file: this unix port's launcher fails on a long argument
    conf = tmp / "link.json"
    conf.write_text(json.dumps(cfg))
    env = dict(os.environ, MICROPYPATH=".frozen:%s" % (tmp / "lib"))
    if preload:
        env["LD_PRELOAD"] = preload
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "micropython"), "-X", "heapsize=256k", str(SCRIPT),
        str(conf), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode(errors="replace")
    r = {k: int(v) for k, v in re.findall(r"^BENCH (\S+) (-?\d+)$", text, re.M)}
    if "open.gc" not in r:
        raise RuntimeError("the board failed: %s" % text.strip()[-1500:])
    return r


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="pubmote-tls-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cert, key = make_gateway_cert(tmp / "tls")
        compile_tree(tmp / "lib")  # .mpy files, as a board runs them
        preload = shim(tmp)
        conf = load_config(None, {"tcp": ["127.0.0.1:0"], "tcp_tls_cert": str(cert),
                                  "tcp_tls_key": str(key),
                                  "board_links_require_encryption": False,
                                  "allow_anonymous_boards": True})  # keyless boards
        async with Bridge(conf) as bridge:
            srv = bridge.tcp[0].server
            assert isinstance(srv, asyncio.Server)
            base = {"link": "tcp", "host": "127.0.0.1",
                    "port": srv.sockets[0].getsockname()[1]}
            cases = [
                ("tcp, clear", base),
                ("tcp, TLS (tls_ca)", {**base, **board_settings(cert)}),
                ("tcp, TLS (tls_fingerprint)", {
                    **base, "tls": 1, "tls_fingerprint": fingerprint(load_cert(cert))}),
            ]
            rows = [(label, await measure(cfg, preload, tmp)) for label, cfg in cases]
    print("Board heap of the WiFi TCP link, MicroPython unix port (64-bit):")
    print("modules from .mpy; bytes live after gc.collect(), relative to before the link")
    print("module was imported;")
    print("'C heap' is mbedTLS's own allocations (libc malloc on the unix port; on a Pico W")
    print("they come from the MicroPython heap, on an ESP32 from the IDF heap).")
    print("  %-28s %10s %10s %12s %10s %14s" % ("link", "py module", "py open",
                                                "C heap open", "py+C open", "left at close"))
    plain = rows[0][1]
    for label, r in rows:
        py_open = r["open.gc"] - r["start.gc"]
        c_open = r["open.c"] - r["start.c"] if preload else -1
        left = r["closed.gc"] - r["start.gc"] + (r["closed.c"] - r["start.c"] if preload else 0)
        print("  %-28s %10d %10d %12s %10s %14d" % (
            label, r["made.gc"] - r["start.gc"], py_open, c_open if preload else "n/a",
            py_open + c_open if preload else "n/a", left))
    for label, r in rows[1:]:
        extra_py = (r["open.gc"] - r["start.gc"]) - (plain["open.gc"] - plain["start.gc"])
        extra_c = (r["open.c"] - r["start.c"]) - (plain["open.c"] - plain["start.c"])
        print("  %s over the clear link: +%d B MicroPython heap%s" % (
            label, extra_py, ", +%d B C heap" % extra_c if preload else ""))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
