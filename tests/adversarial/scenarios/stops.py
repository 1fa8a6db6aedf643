"""The bridge stopped under load: the real `pubmote bridge` command stopped with SIGINT or
SIGTERM while a board publishes every 5 ms (a subscriber that reads everything, one that
reads nothing), and killed with SIGKILL and started again while a board publishes.
Each returns the board's acked and lost messages and the bridge process's memory."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pynng
from measure import Bound, Measure

import faults
from e2e import APPS, free_port, journal_records
from pubmote.gateway.config import load_config
from pubmote_wire import sp

from .common import scaled
from .journal import relayed_seqs

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
PREFIX = b"/test/sim1/seq|"
CONFIG = "sp_buffer_bytes = 65536\n"  # the unread subscriber's buffer fills soon


def _one_stop(tmp: Path, sig: int, past_buffers: int) -> dict[str, Any]:
    m = Measure()
    url = "tcp://127.0.0.1:%d" % free_port()
    udp = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / "gw.toml"
    conf.write_text(CONFIG)
    m.bound = Bound(load_config(str(conf), {"journal": str(tmp / "journal")})).sp_pub(2) \
        .journal()
    app = {"seq_period_ms": 5, "pad": 600, "acked_log": "acked.log", "link": "udp",
           "host": "127.0.0.1", "port": udp}
    args = [PUBMOTE, "bridge", "--no-view", "--config", str(conf), "--sim-boards", "1",
            "--sim-dir", str(tmp / "sim"), "--sim-app-dir", str(APPS), "--sim-app", "probe_app",
            "--sim-app-config", json.dumps(app), "--udp", "127.0.0.1:%d" % udp,
            "--sp-pub", url, "--sp-sub", "none", "--journal", str(tmp / "journal"),
            # a keyless board batches: the fastest flood the link carries
            "--no-sim-keys", "--allow-anonymous-boards"]
    log = tmp / "bridge.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    m.watch(p.pid)
    got: list[bytes] = []
    slow = socket.socket()
    sampled = [0.0]

    def sample() -> None:
        if time.monotonic() - sampled[0] > 0.1:
            m.sample()
            sampled[0] = time.monotonic()

    try:
        with pynng.Sub0(recv_timeout=100) as sub:
            sub.subscribe(PREFIX)
            sub.dial(url, block=False)

            def take(n: int, timeout_s: float) -> None:
                deadline = time.monotonic() + timeout_s
                while len(got) < n and time.monotonic() < deadline:
                    assert p.poll() is None, log.read_text()[-3000:]
                    sample()
                    try:
                        got.append(sub.recv())
                    except pynng.Timeout:
                        pass
                assert len(got) >= n, "%d of %d messages: %s" % (len(got), n,
                                                                 log.read_text()[-3000:])

            take(20, 90)
            m.before()
            # a subscriber that never reads: the stop waits for it (its bound, 2 s)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
            slow.sendall(sp.header(sp.SUB))
            take(len(got) + past_buffers, 60 + past_buffers / 100)
            m.sample()
            p.send_signal(sig)
            stopping = time.monotonic()
            deadline = stopping + 30
            while time.monotonic() < deadline:
                sample()
                try:
                    got.append(sub.recv())
                except pynng.Timeout:
                    if p.poll() is not None:
                        break
            rc = p.wait(30)
            stop_s = time.monotonic() - stopping
            while True:  # what is still in our socket's queue
                try:
                    got.append(sub.recv())
                except pynng.Timeout:
                    break
    finally:
        slow.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    received = {int(x[len(PREFIX):].split(b"|")[0]) for x in got}
    acked_log = tmp / "sim" / "acked.log"
    acked = {int(x) for x in acked_log.read_text().split()} if acked_log.exists() else set()
    acked = {s for s in acked if s >= min(received)}  # we subscribed after the first ones
    m.acked_figures(len(acked), sorted(acked - received))
    journal = relayed_seqs(journal_records(tmp / "journal"))
    text = log.read_text()
    return m.figures(
        rc=rc, stop_s=round(stop_s, 2), not_journaled=sorted(acked - set(journal)),
        journal_in_order=journal == sorted(journal),
        part_files=[f.name for f in (tmp / "journal").glob(".journal-*")],
        waited_for_unread="did not take its buffer" in text, traceback="Traceback" in text)


async def stop_under_load(tmp: Path, scale: float = 1,
                          sig: int = signal.SIGINT) -> dict[str, Any]:
    """One stop with `sig` once 300 messages went by past what the unread subscriber's
    buffers hold. Its memory is the bridge process's; no recovery (it stopped)."""
    return await asyncio.to_thread(_one_stop, tmp, sig, scaled(300, scale))


async def kill_restart(tmp: Path, scale: float = 1) -> dict[str, Any]:
    """The bridge killed with SIGKILL while a board publishes every 50 ms, then started
    again (tests/host/faults.py); its recovery: from the restart to the next message."""
    m = Measure()
    m.bound = Bound(load_config(None, {})).sp_pub(1).sp_sub(1)
    r = await faults.bridge_killed_and_restarted(tmp, after=scaled(20, scale), measure=m)
    return m.figures(kills=r["kills"])
