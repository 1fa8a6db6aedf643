"""Coverage-guided fuzzing (atheris + libFuzzer, CPython) of every parser and incremental
decoder of the codec and of the bridge's NDN face, for a bounded time per target.

    python tests/fuzz/run.py --seconds N [--only NAME[,NAME]] [--stats FILE]

Each target runs in its own subprocess (libFuzzer exits on the first crash) over a working
corpus in build/fuzz/<target>/, seeded from the captured packets (tests/vectors/*.json) and
from the regression corpus tests/vectors/corpus/<target>/. A crash, hang (per-input
timeout) or out-of-memory input is copied into the regression corpus as
crash-<sha1 prefix> (commit it: `make test` replays it on CPython and both MicroPythons)
and makes the exit status non-zero. Stats go to --stats as JSON:
{target: {"execs": n, "crashes": k, "seconds": s, "corpus": files, "peak_rss_mb": m,
"new_crashes": [{"kind": "crash"|"timeout"|"oom"|..., "input": path}], "summary": [...],
"log": path}}; logs of each target's libFuzzer run are in build/fuzz/logs/.

The harnesses (what each target checks) are the fuzz_* functions of
tests/shared/test_corpus.py and tests/fuzz/host_targets.py.
"""

from __future__ import annotations

import argparse
import binascii
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
SHARED_TESTS = ROOT / "tests" / "shared"
VECTORS = ROOT / "tests" / "vectors"
CORPUS = VECTORS / "corpus"
WORK = ROOT / "build" / "fuzz"

for _p in (ROOT / "shared", ROOT / "host", SHARED_TESTS, Path(__file__).resolve().parent):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

SHARED_TARGETS = ["tlv", "name", "interest", "data", "notify", "lp", "lp_frag", "framing",
                  "sp", "sp_header", "cbor", "dissect"]
HOST_TARGETS = ["ndn_stream", "ndn_control"]
ALL_TARGETS = SHARED_TARGETS + HOST_TARGETS

RSS_LIMIT_MB = 2048
MAX_LEN = 4096
INPUT_TIMEOUT_S = 10  # one input running this long is a hang
STARTUP_SLACK_S = 120  # seed loading and interpreter start, on top of --seconds

EXECS = [
    re.compile(r"stat::number_of_executed_units:\s*(\d+)"),
    re.compile(r"^#(\d+)\s+DONE", re.M),
    re.compile(r"^Done (\d+) runs", re.M),
]
PROGRESS = re.compile(r"^#(\d+)\s", re.M)
PEAK_RSS = re.compile(r"stat::peak_rss_mb:\s*(\d+)")
ARTIFACT = re.compile(r"Test unit written to (\S+)")
SUMMARY = re.compile(r"^(SUMMARY: .*|==\d+== ERROR: .*|=== Uncaught Python exception: ===)$",
                     re.M)


# ---- the worker (one target, inside libFuzzer) -----------------------------------------


def worker(target: str, libfuzzer_args: list[str]) -> None:
    import atheris

    modules = ["pubmote_wire", "test_corpus"]
    if target in HOST_TARGETS:
        modules += ["pubmote", "host_targets"]
    with atheris.instrument_imports(include=modules):
        # Every codec module now, instrumented (the targets import them lazily).
        import pubmote_wire.cbor
        import pubmote_wire.dissect
        import pubmote_wire.lp_frag
        import pubmote_wire.notify
        import pubmote_wire.sp  # noqa: F401
        import test_corpus

        targets = dict(test_corpus.TARGETS)
        if target in HOST_TARGETS:
            import host_targets

            targets.update(host_targets.TARGETS)
    fn: Callable[[bytes], object] = targets[target]

    def one_input(data: bytes) -> None:
        fn(data)  # any exception, DecodeError included, is a crash: the harness catches it

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    atheris.Fuzz()


# ---- seeds from the captured packets ----------------------------------------------------


def _packets() -> dict[str, bytes]:
    data = json.loads((VECTORS / "ndn_notify.json").read_text())
    return {p["label"]: binascii.unhexlify(p["hex"]) for p in data["packets"]}


def _stream_seed(stream: bytes, k: int) -> bytes:
    return bytes([k]) + stream


def _records(pkts: list[bytes], dt: int = 1) -> bytes:
    return b"".join(bytes([dt]) + len(p).to_bytes(2, "big") + p for p in pkts)


def seeds(target: str) -> dict[str, bytes]:
    """{name: bytes} starting points for target, built from tests/vectors/*.json."""
    from pubmote_wire import cbor, framing, interest, lp, lp_frag, sp
    from pubmote_wire import name as ndn_name
    from pubmote_wire.tlv import read_tlv

    pkts = _packets()
    allp = list(pkts.values())
    names = []
    for p in allp:
        _, vs, ve = read_tlv(p)
        _, ns, ne = read_tlv(p, vs, ve)
        names.append(p[ns:ne])
    notify_i = pkts["notify Interest"]
    notify_params = interest.decode_interest(notify_i).app_params
    assert notify_params is not None
    app_params = bytes(notify_params)
    bep44 = json.loads((VECTORS / "bep44_krpc.json").read_text())["packets"]
    krpc = [binascii.unhexlify(v["hex"]) for v in bep44.values()]
    sp_tcp = json.loads((VECTORS / "sp_tcp.json").read_text())
    sp_bytes = [binascii.unhexlify(v) for k, v in sp_tcp.items() if k.endswith("hex")]
    out: dict[str, list[bytes]] = {
        "tlv": allp + names + krpc,
        "name": names + [u.encode() for u in ("/a/b", "ndn:/x/seg=3/v=7", "/8=%00%ff/...",
                                                "/sha256digest=" + "ab" * 32, "/300=x")],
        "interest": [pkts["notify Interest"], pkts["msg Interest"]],
        "data": [pkts["msg Data"], pkts["notify ack Data"]],
        "notify": [notify_i, app_params],
        "lp": [lp.encode(p, sequence=7, pit_token=b"tok") for p in allp]
        + [lp.encode(pkts["msg Interest"], nack_reason=lp.NACK_NO_ROUTE),
           lp.encode(acks=[1, 2, 3], tx_sequence=9, congestion_mark=1)]
        + lp_frag.fragment(notify_i, 64, 100),
        "lp_frag": [_records(lp_frag.fragment(notify_i, 64, 100)),
                    _records(list(reversed(lp_frag.fragment(pkts["msg Data"], 48, 5)))),
                    _records(lp_frag.fragment(notify_i, 64, 1) + lp_frag.fragment(
                        pkts["msg Data"], 40, 50), dt=30),
                    _records([lp.encode(pkts["msg Interest"], sequence=1)])],
        "framing": [_stream_seed(b"".join(framing.encode(p) for p in allp), k)
                    for k in (0, 7, 63)] + [_stream_seed(framing.encode(b"\x00" * 300), 5)],
        "sp": [_stream_seed(sp.header(sp.PUB) + b"".join(sp.encode_msg(p) for p in allp), 0x80 | k)
               for k in (0, 9)] + [_stream_seed(b"".join(sp_bytes[2:]), 3)],
        "sp_header": [*sp_bytes, sp.header(sp.SUB) + sp.encode_msg(b"abc")],
        "cbor": [cbor.dumps(x) for x in (
            {"t": "a/msg0", "b": b"hello", "n": [1, -2, 3.5, None, True, False]},
            [[[[{"k": [1]}]]]], 2**64 - 1, -(2**64), "\u00e9\u4e2d", {b"x": {"y": 1.0}})]
        + [bytes.fromhex("f97e00"), bytes.fromhex("fa47c35000")],
        "dissect": allp + [lp.encode(p, sequence=1) for p in allp],
        "ndn_stream": [_stream_seed(b"".join(allp), k) for k in (0, 3, 40)],
    }
    from pubmote.core import nfd_mgmt

    cp = nfd_mgmt.control_response(200, "OK", {"name": ndn_name.from_uri("/a/b"), "cost": 5})
    _, vs, ve = read_tlv(cp)  # ControlResponse: StatusCode, StatusText, ControlParameters
    e1 = read_tlv(cp, vs, ve)[2]
    e2 = read_tlv(cp, e1, ve)[2]
    params = cp[e2 : read_tlv(cp, e2, ve)[2]]
    cmd = ndn_name.from_uri("/localhost/nfd/rib/register") + ndn_name.generic(params)
    out["ndn_control"] = [params, cmd]
    return {"seed-%02d" % i: b for i, b in enumerate(out[target])}


# ---- the driver -------------------------------------------------------------------------


def _sha1(b: bytes) -> str:
    return hashlib.sha1(b).hexdigest()


def prepare(target: str) -> tuple[Path, Path]:
    """The working corpus dir (seeded) and the artifact dir of target."""
    work = WORK / target
    art = WORK / (target + ".artifacts")
    work.mkdir(parents=True, exist_ok=True)
    if art.exists():
        shutil.rmtree(art)
    art.mkdir(parents=True)
    for b in seeds(target).values():
        (work / _sha1(b)).write_bytes(b)
    reg = CORPUS / target
    if reg.is_dir():
        for f in sorted(reg.iterdir()):
            if f.is_file():
                b = f.read_bytes()
                (work / _sha1(b)).write_bytes(b)
    return work, art


def parse_execs(text: str) -> int:
    for rx in EXECS:
        m = rx.findall(text)
        if m:
            return max(int(x) for x in m)
    m = PROGRESS.findall(text)
    return max((int(x) for x in m), default=0)


def run_target(target: str, seconds: int, log_dir: Path) -> dict[str, Any]:
    work, art = prepare(target)
    args = [
        "-max_total_time=%d" % seconds,
        "-rss_limit_mb=%d" % RSS_LIMIT_MB,
        "-max_len=%d" % MAX_LEN,
        "-timeout=%d" % INPUT_TIMEOUT_S,
        "-print_final_stats=1",
        "-artifact_prefix=%s/" % art,
        str(work),
    ]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", target, "--", *args]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, errors="replace",
                           timeout=seconds + STARTUP_SLACK_S)
        text = p.stdout + p.stderr
        rc = p.returncode
    except subprocess.TimeoutExpired as e:
        text = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                else (e.stdout or "")) + "\nrun.py: the fuzzer itself hung; killed\n"
        rc = -1
    elapsed = time.monotonic() - t0
    (log_dir / (target + ".log")).write_text(text)
    crashes: list[dict[str, str | None]] = []
    for f in sorted(art.iterdir()):
        if f.is_file():
            b = f.read_bytes()
            dest = CORPUS / target / ("crash-" + _sha1(b)[:12])
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(b)
            crashes.append({"kind": f.name.split("-")[0], "input": str(dest.relative_to(ROOT))})
    if rc != 0 and not crashes:
        crashes.append({"kind": "exit %d" % rc, "input": None})
    return {
        "execs": parse_execs(text),
        "crashes": len(crashes),
        "seconds": round(elapsed, 1),
        "corpus": sum(1 for f in work.iterdir() if f.is_file()),
        "peak_rss_mb": max((int(x) for x in PEAK_RSS.findall(text)), default=None),
        "new_crashes": crashes,
        "summary": SUMMARY.findall(text)[:3],
        "log": str((log_dir / (target + ".log")).relative_to(ROOT)),
    }


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "--worker":
        rest = argv[3:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        worker(argv[2], rest)
        return 0
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=30, help="fuzzing time per target")
    ap.add_argument("--only", help="comma-separated targets (default: all)")
    ap.add_argument("--stats", default=str(WORK / "stats.json"), help="JSON stats file")
    ap.add_argument("--list", action="store_true", help="print the targets and exit")
    args = ap.parse_args(argv[1:])
    if args.list:
        print("\n".join(ALL_TARGETS))
        return 0
    targets = ALL_TARGETS
    if args.only:
        targets = [t.strip() for t in args.only.split(",") if t.strip()]
        bad = [t for t in targets if t not in ALL_TARGETS]
        if bad:
            ap.error("unknown target(s) %s; known: %s" % (", ".join(bad), ", ".join(ALL_TARGETS)))
    if args.seconds < 1:
        ap.error("--seconds must be at least 1")
    try:
        import atheris  # noqa: F401
    except ImportError:
        sys.exit("atheris is not installed in this Python: run `make setup` (dev extra)")
    log_dir = WORK / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    stats: dict[str, dict[str, Any]] = {}
    for t in targets:
        s = run_target(t, args.seconds, log_dir)
        stats[t] = s
        line = "%-12s %10d execs  %5.1fs  corpus %5d  rss %4sMB  crashes %d" % (
            t, s["execs"], s["seconds"], s["corpus"], s["peak_rss_mb"], s["crashes"])
        print(line, flush=True)
        for c in s["new_crashes"]:
            print("    %s -> %s  (log %s)" % (c["kind"], c["input"], s["log"]), flush=True)
        for line in s["summary"]:
            print("    " + line, flush=True)
    out = Path(args.stats)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")
    total = sum(int(s["crashes"]) for s in stats.values())
    print("fuzz: %d targets, %d execs, %d crashes; stats in %s"
          % (len(stats), sum(int(s["execs"]) for s in stats.values()), total, out))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
