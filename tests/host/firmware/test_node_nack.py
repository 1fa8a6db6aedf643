"""The board node's NDNLPv2 path (CPython runs the firmware's node.py): a Nack wakes the
pending Interest it names, another LpPacket's fragment is handled as a packet, and lp is
let go after, unless something else had loaded it (on a board nothing had: its heap keeps
no lp module)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from pubmote_node.node import _EV, Node
from pubmote_wire import interest, lp

ROOT = Path(__file__).resolve().parents[3]


def _node() -> Node:
    return Node({"name": "t1", "link": "pty", "path": "/dev/null"})


def _lp(fragment: bytes, **fields: int) -> bytes:
    buf = bytearray(len(fragment) + 64)
    n = lp.encode_lp(buf, 0, fragment, **fields)
    return bytes(buf[:n])


def test_a_nack_wakes_the_interest_it_names() -> None:
    async def run() -> None:
        n = _node()
        name = b"\x08\x03pub\x08\x03msg\x08\x01x"
        p = [asyncio.Event(), None, None]
        n._pending[name] = p
        n._on_packet(_lp(interest.encode(name, nonce=7), nack_reason=lp.NACK_NO_ROUTE))
        assert p[_EV].is_set() and p[1] is None  # woken, with no Data: a failed fetch
        assert n.counters["nacks"] == 1
        n._on_packet(_lp(interest.encode(b"\x08\x05other", nonce=8), nack_reason=150))
        assert n.counters["nacks"] == 2  # counted, though nothing waits for it

    asyncio.run(run())


def test_a_fragment_without_nack_is_handled_as_its_packet() -> None:
    n = _node()
    seen: list[bytes] = []
    n._on_interest = seen.append  # type: ignore[method-assign]
    pkt = interest.encode(b"\x08\x05hello", nonce=9)
    n._on_packet(_lp(pkt))
    assert seen == [pkt] and n.counters["nacks"] == 0


def test_lp_is_let_go_only_if_the_node_loaded_it() -> None:
    # a fresh interpreter where nothing has loaded lp, as on a board; then one where the
    # host had (its module must stay: others hold its classes)
    code = """
import sys
from pubmote_wire import interest
from pubmote_node.node import Node
n = Node({"name": "t1", "link": "pty", "path": "/dev/null"})
pre = sys.argv[1] == "pre"
if pre:
    from pubmote_wire import lp as before
frag = interest.encode(b"\\x08\\x01a", nonce=1)
pkt = b"\\x64" + bytes([len(frag) + 2]) + b"\\x50" + bytes([len(frag)]) + frag
seen = []
n._on_interest = seen.append
n._on_packet(pkt)
assert seen == [frag], seen
import pubmote_wire
kept = "pubmote_wire.lp" in sys.modules
assert kept == hasattr(pubmote_wire, "lp")
if pre:
    assert sys.modules["pubmote_wire.lp"] is before
print("kept" if kept else "gone")
"""
    for arg, want in (("fresh", "gone"), ("pre", "kept")):
        out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True,
                             timeout=60, check=True, cwd=ROOT).stdout.split()
        assert out == [want], out

