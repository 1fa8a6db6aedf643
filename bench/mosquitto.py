"""The benches' MQTT peer: a mosquitto broker on a free 127.0.0.1 port for the length of a
`with` block, and the wait for a listening port that the benches share."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "host"))
from e2e import free_port  # noqa: E402 - the tests' port reservation


def wait_port(port: int, timeout_s: float = 20) -> None:
    """Return once something listens on 127.0.0.1:port; RuntimeError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("nothing listening on port %d after %.0f s" % (port, timeout_s))


@contextlib.contextmanager
def mosquitto(extra_conf: str = "") -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """(port, process) of a broker that takes anonymous clients and keeps nothing on disk;
    extra_conf: more lines of its configuration. Exits the bench if it is not installed."""
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(exe).exists():
        sys.exit("mosquitto not installed: run `make setup` (Debian package mosquitto)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pubmote-mqtt-") as tmp:
        conf = Path(tmp) / "mosquitto.conf"
        conf.write_text("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n"
                        "log_dest none\n%s" % (port, extra_conf))
        broker = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            yield port, broker
        finally:
            broker.terminate()
            broker.wait(10)
