"""Board-link benchmark: acked publishes per second from one MicroPython board, pubmote
against MQTT, in the same run on the same machine.

- umqtt.simple (micropython-lib, QoS 1) on the MicroPython unix port -> mosquitto on
  loopback: each publish waits for its PUBACK.
- pubmote: the same unix port running the firmware as a simulated board (pty, the bridge's
  serial face; one row over TCP loopback to its --tcp face, umqtt's medium) -> bridge -> a
  pynng SUB; `lanes` publishes in flight, each awaiting its ack.

Rates and latencies (publish call -> ack, p50/p99) are measured on the board; the bridge's
own share of a message's latency (its face's read of the message to the write that hands it
to the SUB's socket) by the bridge. Every message the pubmote board saw acked must reach
the SUB: the `lost` column counts those that did not.
umqtt.simple comes from micropython-lib inside the MicroPython source tarball that the
firmware build uses (../shared/rp2040); mosquitto is the Debian package (make setup).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import pynng

from pubmote.boards.cable import end_process

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TARBALL = ROOT.parent / "shared" / "rp2040" / "micropython-1.27.0-rp2-src.tar.xz"
UMQTT_IN_TARBALL = ("micropython-1.27.0-rp2/micropython/lib/micropython-lib/micropython/"
                    "umqtt.simple/umqtt/simple.py")
PEERS = ROOT / "build" / "peers" / "umqtt"
DEFAULT_WINDOW = 32  # a board's messages in flight by default (firmware batch_link.py)
NOTIFY_WINDOW = 4  # with NDN notifies (at most max_soft, 8): 4 did best of 1, 4, 8
RESULT = re.compile(r"^RESULT (\S+) acked=(\d+) failed=(\d+) seconds=([\d.]+) "
                    r"p50_ms=([-\d.]+) p99_ms=([-\d.]+)", re.M)

sys.path.insert(0, str(ROOT / "tests" / "host"))
sys.path.insert(0, str(ROOT / "bench"))
from mosquitto import mosquitto  # noqa: E402

from e2e import free_port  # noqa: E402 - the tests' port reservation


def umqtt_dir() -> Path:
    """A folder holding umqtt/simple.py, taken once from the MicroPython source tarball."""
    dest = PEERS / "umqtt" / "simple.py"
    if not dest.exists():
        if not TARBALL.exists():
            sys.exit("umqtt.simple: %s not found (the MicroPython source tarball)" % TARBALL)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(TARBALL) as tar:
            src = tar.extractfile(UMQTT_IN_TARBALL)
            assert src is not None
            dest.write_bytes(src.read())
    return PEERS


def micropython() -> str:
    return str(Path(sys.executable).parent / "micropython")


def parse(text: str) -> dict[str, Any]:
    m = RESULT.search(text)
    if m is None:
        raise RuntimeError("no RESULT line in:\n" + text[-2000:])
    acked, seconds = int(m.group(2)), float(m.group(4))
    return {"label": m.group(1), "acked": acked, "failed": int(m.group(3)),
            "rate": acked / seconds, "p50": float(m.group(5)), "p99": float(m.group(6))}


def bench_mqtt(seconds: float) -> dict[str, Any]:
    with mosquitto() as (port, _):
        env = {"MICROPYPATH": "%s:%s" % (HERE, umqtt_dir()), "PATH": "/usr/bin:/bin"}
        p = subprocess.run([micropython(), "-X", "heapsize=256k", str(HERE / "mqtt_pub.py"),
                            "127.0.0.1", str(port), str(seconds)],
                           capture_output=True, text=True, env=env, timeout=seconds + 60)
        return parse(p.stdout + p.stderr)


def bench_pubmote(seconds: float, lanes: int, *, app: str = "pubmote_pub",
                  wrap: list[str] | None = None, log_out: list[str] | None = None,
                  app_extra: dict[str, Any] | None = None, tcp: bool = False,
                  keyed: bool = False) -> dict[str, Any]:
    """One pubmote row; wrap prefixes the bridge's command (a profiler), log_out gets the
    board's log. tcp: the board dials the bridge's --tcp face over loopback (a WiFi
    board's link, and umqtt's medium) instead of its serial face through a pty cable.
    keyed: the board has a key (the bridge's default for simulated boards: every message
    HMAC-signed, no link batches); else keyless, admitted with --allow-anonymous-boards."""
    url = "tcp://127.0.0.1:%d" % free_port()
    exe = str(Path(sys.executable).parent / "pubmote")
    link: list[str] = [] if keyed else ["--no-sim-keys", "--allow-anonymous-boards"]
    if tcp:
        port = free_port()
        link += ["--tcp", "127.0.0.1:%d" % port]
        app_extra = {**(app_extra or {}), "link": "tcp", "host": "127.0.0.1", "port": port}
    with tempfile.TemporaryDirectory(prefix="pubmote-link-") as tmp:
        sub = pynng.Sub0(recv_buffer_size=8192, recv_timeout=200)
        sub.subscribe(b"/bench/")
        sub.dial(url, block=False)
        app_cfg = json.dumps({"lanes": lanes, "seconds": seconds, "warmup_s": 1,
                              **(app_extra or {})})
        bridge = subprocess.Popen(
            [*(wrap or []), exe, "bridge", "--no-view", "--sim-boards", "1", "--sim-dir", tmp,
             "--sim-app", app, "--sim-app-dir", str(HERE), "--sp-pub", url,
             "--sp-sub", "none", "--sim-app-config", app_cfg, *link], stdout=subprocess.DEVNULL,
            stderr=open(Path(tmp) / "bridge.log", "wb"))  # noqa: SIM115 - closed with tmp
        got = 0
        log = Path(tmp) / "sim1.log"
        try:
            deadline = time.monotonic() + seconds + 60
            t_check = 0.0
            while time.monotonic() < deadline:
                try:
                    sub.recv()
                    got += 1
                except pynng.Timeout:
                    pass
                # the board's log looked at now and then, not per message: this loop must
                # keep up with the SUB, whose queue drops what it has no room for
                if time.monotonic() - t_check > 0.2:
                    t_check = time.monotonic()
                    if log.exists() and "RESULT" in log.read_text(errors="replace"):
                        break
            # what the board saw acked before it printed its result is on its way: drain
            while True:
                try:
                    sub.recv()
                    got += 1
                except pynng.Timeout:
                    break
            text = log.read_text(errors="replace")
            r = parse(text)
            if log_out is not None:
                log_out.append(text)
        finally:
            sub.close()
            end_process(bridge, signal.SIGINT, grace_s=15)
        # the bridge's summary: what its SP PUB endpoint dropped at a full subscriber
        # buffer (counted, as the guarantee allows), beside what it sent
        blog = (Path(tmp) / "bridge.log").read_text(errors="replace")
        found = re.findall(r"SP PUB \S+: \d+ clients, (\d+) sent in \d+ writes, (\d+) dropped",
                           blog)
        r["sp_dropped"] = int(found[-1][1]) if found else -1
        r["sp_sent"] = int(found[-1][0]) if found else -1
        # the bridge's own latency: its serial face's read of a record to the write that
        # hands it to the SUB's socket (over the whole run, warm-up included)
        lat = re.findall(r"bridge-added latency p50 ([\d.]+) ms, p99 ([\d.]+) ms", blog)
        r["bridge_p50"], r["bridge_p99"] = (float(lat[-1][0]), float(lat[-1][1])) if lat else (
            -1.0, -1.0)
    # the SUB counts the warm-up's messages too; every acked one must be among them, or
    # counted as dropped by the bridge (a subscriber whose buffer was full). "lost" is
    # what is neither: 0 in every run, or the guarantee is broken (or, on a machine so
    # loaded that this process falls behind, pynng's own SUB queue overflowed)
    r["lost"] = max(0, r["acked"] - got - max(0, r["sp_dropped"]))
    return r


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def board_steps() -> list[tuple[str, float]]:
    """The board's codec and framing steps per message, on the unix port (steps.py)."""
    env = {"MICROPYPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([micropython(), "-X", "heapsize=256k", str(HERE / "steps.py")],
                       capture_output=True, text=True, env=env, timeout=120)
    return [(k, float(v)) for k, v in re.findall(r"^STEP (\S+) ([\d.]+)$", p.stdout, re.M)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="per row (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of umqtt, the defaults and the defaults over TCP, taking "
                         "turns (default 3): the machine's load moves within a run")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    mqtt_label = "micropython-lib umqtt.simple, QoS 1 -> mosquitto (TCP loopback)"
    pty_label = "pubmote, keyless board (link batches, %d in flight)" % DEFAULT_WINDOW
    tcp_label = "pubmote, keyless board over TCP loopback (umqtt's medium)"
    rounds: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
    for _ in range(args.rounds):
        rounds.append((bench_mqtt(args.seconds), bench_pubmote(args.seconds, DEFAULT_WINDOW),
                       bench_pubmote(args.seconds, DEFAULT_WINDOW, tcp=True)))
    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i, (mq, pty, tcp) in enumerate(rounds):
        rows += [("%s, round %d" % (mqtt_label, i + 1), mq, mq),
                 ("%s, round %d" % (pty_label, i + 1), pty, mq),
                 ("%s, round %d" % (tcp_label, i + 1), tcp, mq)]
    base = median([mq["rate"] for mq, _, _ in rounds])
    ref = {"rate": base}  # the later rows against umqtt's median rate
    notify = {"batch": False}  # NDN notify per message: the baseline without link batches
    rows.append(("pubmote NDN notify, 1 in flight -> bridge -> pynng SUB",
                 bench_pubmote(args.seconds, 1, app_extra=notify), ref))
    rows.append(("pubmote NDN notify, 4 in flight",
                 bench_pubmote(args.seconds, 4, app_extra=notify), ref))
    rows.append(("pubmote link batches, 1 in flight", bench_pubmote(args.seconds, 1), ref))
    # a keyed board publishes by NDN notify (HMAC-signed, no link batches): at most
    # max_soft (8) messages in flight, beyond which publish() fails at once
    rows.append(("pubmote, board with a key (signed notifies, %d in flight)" % NOTIFY_WINDOW,
                 bench_pubmote(args.seconds, NOTIFY_WINDOW, keyed=True), ref))
    rows.append(("pubmote, board with a key, over TCP loopback",
                 bench_pubmote(args.seconds, NOTIFY_WINDOW, keyed=True, tcp=True), ref))
    paced = int(0.8 * base)
    rows.append(("pubmote, keyless board, paced at 80%% of umqtt's median (%d/s)" % paced,
                 bench_pubmote(args.seconds, DEFAULT_WINDOW, app_extra={"rate": paced}), ref))
    print("One board's acked publishes (MicroPython unix port, same run, %g s per row; "
          "each round's pubmote rows against that round's umqtt, the rest against umqtt's "
          "median)" % args.seconds)
    print("  %-71s %10s %8s %8s %8s %8s %8s %7s %8s" % (
        "set-up", "acked/s", "p50 ms", "p99 ms", "bridge", "bridge", "dropped", "lost",
        "vs MQTT"))
    print("  %-71s %10s %8s %8s %8s %8s" % ("", "", "", "", "p50 ms", "p99 ms"))
    for label, r, peer in rows:
        bridge = ("%8.2f %8.2f" % (r["bridge_p50"], r["bridge_p99"]) if "bridge_p50" in r
                  else "%8s %8s" % ("-", "-"))
        print("  %-71s %10.0f %8.2f %8.2f %s %8s %7s %7.2fx" % (
            label, r["rate"], r["p50"], r["p99"], bridge, r.get("sp_dropped", "-"),
            r.get("lost", "-"), r["rate"] / peer["rate"]))
    for label, k in ((pty_label, 1), (tcp_label, 2)):
        ratios = [rd[k]["rate"] / rd[0]["rate"] for rd in rounds]
        print("  %s: median %.2fx umqtt.simple over %d rounds (%s)" % (
            label, median(ratios), len(ratios), ", ".join("%.2f" % x for x in ratios)))
    print("  (p50/p99: publish -> ack on the board; bridge p50/p99: the bridge's own share, its "
          "serial face's read of a message to its write to the SUB's socket; dropped: counted "
          "by the bridge at a subscriber whose buffer was full; lost: acked but neither "
          "received nor counted; load average %.1f -> %.1f)" % (load0, os.getloadavg()[0]))
    steps = board_steps()
    print("  where one message's time goes on the board (codec and framing, unix port):")
    print("    " + ", ".join("%s %.0f us" % kv for kv in steps)
          + "; total %.0f us of %.0f us per message with NDN notifies at 1 in flight"
          % (sum(v for _, v in steps), 1e6 / rows[3 * args.rounds][1]["rate"]))
    lost = sum(r.get("lost", 0) for _, r, _ in rows)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
