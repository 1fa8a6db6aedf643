"""The board's TLS link (firmware/pubmote_node/link_tls.py) on the MicroPython unix port:
loaded only for a config that asks for TLS, refusing configs that cannot verify the
gateway or that ask TLS of a link it cannot cover. (Verifying the gateway over a real
handshake: tests/adversarial/test_link_security.py.)"""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_SCRIPT = r"""
import sys
from pubmote_node import links

def kind(cfg):
    try:
        return type(links.from_config(cfg)).__name__
    except ValueError as e:
        return "ValueError"

plain = {"link": "tcp", "host": "127.0.0.1", "port": 6365}
print("PLAIN", kind(plain), "pubmote_node.link_tls" in sys.modules)
fp = "ab" * 32
print("TLS", kind({"link": "tcp", "host": "h", "port": 1, "tls": 1, "tls_fingerprint": fp}),
      "pubmote_node.link_tls" in sys.modules)
print("UDP_TLS", kind({"link": "udp", "host": "h", "port": 1, "tls": 1, "tls_fingerprint": fp}))
print("NEITHER", kind({"link": "tcp", "host": "h", "port": 1, "tls": 1}))
print("BOTH", kind({"link": "tcp", "host": "h", "port": 1, "tls": 1, "tls_fingerprint": fp,
                    "tls_ca": "3082"}))
print("SHORT", kind({"link": "tcp", "host": "h", "port": 1, "tls": 1, "tls_fingerprint": "ab"}))
"""


def test_tls_link_loaded_only_when_asked_for_and_misconfigs_refused() -> None:
    exe = str(Path(sys.executable).parent / "micropython")
    path = ".frozen:%s:%s" % (ROOT / "shared", ROOT / "firmware")
    p = subprocess.run([exe, "-X", "heapsize=256k", "-c", _SCRIPT], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, MICROPYPATH=path))
    assert p.returncode == 0, p.stdout + p.stderr
    out = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert out == {"PLAIN": "TcpLink False", "TLS": "TlsLink True", "UDP_TLS": "ValueError",
                   "NEITHER": "ValueError", "BOTH": "ValueError", "SHORT": "ValueError"}, out


def test_no_tls_import_outside_the_tls_link() -> None:
    # the tls module (mbedTLS's contexts) is imported inside TlsLink.open only, and
    # link_tls only by links.from_config for a config with "tls"
    fw = ROOT / "firmware" / "pubmote_node"
    for src in fw.glob("*.py"):
        tree = ast.parse(src.read_text())
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        assert not any("tls" in ast.dump(n) for n in top), src.name
    inside = ast.parse((fw / "link_tls.py").read_text())
    opens = [f for f in ast.walk(inside) if isinstance(f, ast.AsyncFunctionDef)
             and f.name == "open"]
    assert any(isinstance(n, ast.Import) and n.names[0].name == "tls"
               for n in ast.walk(opens[0]))


def test_closing_a_tcp_link_closes_its_socket_at_once() -> None:
    # MicroPython's Stream.close() leaves the socket open: a link that relied on it held
    # every dropped connection's socket (and with TLS mbedTLS's buffers) until a gc
    exe = str(Path(sys.executable).parent / "micropython")
    path = ".frozen:%s:%s" % (ROOT / "shared", ROOT / "firmware")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        script = ("import asyncio, time\nfrom pubmote_node.link_net import TcpLink\n"
                  "async def main():\n    l = TcpLink('127.0.0.1', %d)\n    await l.open()\n"
                  "    l.close()\n    print('CLOSED')\n    time.sleep(20)\n"
                  "asyncio.run(main())\n" % port)
        board = subprocess.Popen([exe, "-c", script], stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, MICROPYPATH=path))
        try:
            srv.settimeout(30)
            conn, _ = srv.accept()
            with conn:
                assert board.stdout is not None and board.stdout.readline() == "CLOSED\n"
                conn.settimeout(10)  # the board sleeps 20 s without collecting garbage
                assert conn.recv(16) == b""  # the board hung up
        finally:
            board.kill()
            board.wait()
