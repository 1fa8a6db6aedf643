"""Stopping the bridge (SIGINT, SIGTERM) while a board publishes loses nothing it acked:
the real `pubmote bridge` command, a board on UDP publishing every 5 ms and logging every
seq it saw acked, a subscriber that reads everything and one that reads nothing (so the
stop waits for it, up to its bound, while the board keeps publishing). After each stop,
every acked message reached the reading subscriber and is in the journal; exit status 130
after SIGINT, 0 after SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pynng
import pytest

from e2e import APPS, free_port
from pubmote_wire import sp

PUBMOTE = str(Path(sys.executable).parent / "pubmote")
PREFIX = b"/test/sim1/seq|"
STOPS = 2  # per signal


def _journal_seqs(jdir: Path) -> list[int]:
    out = []
    for f in sorted(jdir.glob("journal-*.jsonl")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["outcome"] == "relayed" and r["topic"] == "/test/sim1/seq":
                out.append(int(bytes.fromhex(r["payload"]).split(b"|")[0]))
    return out


def _one_stop(tmp: Path, sig: int) -> dict[str, object]:
    url = "tcp://127.0.0.1:%d" % free_port()
    udp = free_port()
    tmp.mkdir()
    conf = tmp / "gw.toml"
    conf.write_text("sp_buffer_bytes = 65536\n")  # the unread subscriber's buffer fills soon
    app = {"seq_period_ms": 5, "pad": 600, "acked_log": "acked.log", "link": "udp",
           "host": "127.0.0.1", "port": udp}
    args = [PUBMOTE, "bridge", "--no-view", "--config", str(conf), "--sim-boards", "1",
            "--sim-dir", str(tmp / "sim"), "--sim-app-dir", str(APPS), "--sim-app", "probe_app",
            "--sim-app-config", json.dumps(app), "--udp", "127.0.0.1:%d" % udp,
            "--sp-pub", url, "--sp-sub", "none", "--journal", str(tmp / "journal")]
    log = tmp / "bridge.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    got: list[bytes] = []
    slow = socket.socket()
    try:
        with pynng.Sub0(recv_timeout=100) as sub:
            sub.subscribe(PREFIX)
            sub.dial(url, block=False)

            def take(n: int, timeout_s: float) -> None:
                deadline = time.monotonic() + timeout_s
                while len(got) < n and time.monotonic() < deadline:
                    assert p.poll() is None, log.read_text()[-3000:]
                    try:
                        got.append(sub.recv())
                    except pynng.Timeout:
                        pass
                assert len(got) >= n, "%d of %d messages: %s" % (len(got), n,
                                                                 log.read_text()[-3000:])

            take(20, 90)
            # a subscriber that never reads: the stop waits for it (its bound, 2 s)
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
            slow.sendall(sp.header(sp.SUB))
            take(len(got) + 300, 60)  # well past what the unread one's buffers hold
            p.send_signal(sig)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    got.append(sub.recv())
                except pynng.Timeout:
                    if p.poll() is not None:
                        break
            rc = p.wait(30)
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
    journal = _journal_seqs(tmp / "journal")
    text = log.read_text()
    return {"rc": rc, "acked": len(acked), "lost": sorted(acked - received),
            "not_journaled": sorted(acked - set(journal)),
            "journal_in_order": journal == sorted(journal),
            "part_files": [f.name for f in (tmp / "journal").glob(".journal-*")],
            "waited_for_unread": "did not take its buffer" in text,
            "traceback": "Traceback" in text}


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 0)],
                         ids=["SIGINT", "SIGTERM"])
def test_stop_loses_nothing_acked(tmp_path: Path, sig: int, status: int) -> None:
    for n in range(STOPS):
        r = _one_stop(tmp_path / ("stop%d" % n), sig)
        assert r["acked"] > 300, r  # the board was publishing up to the stop
        assert r["lost"] == [], r
        assert r["not_journaled"] == [] and r["journal_in_order"], r
        assert r["part_files"] == [], r  # every journal file put in place at the stop
        assert r["rc"] == status and not r["traceback"], r
        assert r["waited_for_unread"], r  # the stop did wait, the board publishing meanwhile
