"""The board's NDN face (firmware/pubmote_node/face.py, on CPython), each part on its own.
Port: a packet goes out as one frame, in parts through a one-block buffer on a byte stream,
and comes back whole through the deframer; a frame that waited its turn while the link
closed is refused (OSError), never written to the closed link. Exchange: each packet type
the codec makes goes where it belongs, a Nack ends the wait of the Interest it names at
once, an LpPacket's fragment is taken as its packet, anything else is counted, never raised;
lp is let go after, unless something else had loaded it (on a board nothing had: its heap
keeps no lp module)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pubmote_node.batch_link import Batcher
from pubmote_node.face import MAX_PACKET, Exchange, Port
from pubmote_wire import batch, data, framing, interest, lp

ROOT = Path(__file__).resolve().parents[3]
NAME = b"\x08\x03pub\x08\x03msg\x08\x01x"


class Link:
    """A link in memory: what is written lands in `out`; reads wait for feed() or end."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.writes = 0
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False

    async def open(self) -> None:
        self.closed = False

    async def readinto(self, buf: bytearray) -> int:
        chunk = await self.inbox.get()
        buf[: len(chunk)] = chunk
        return len(chunk)

    async def write(self, mv: memoryview) -> None:
        assert not self.closed, "written after close"
        self.out += mv
        self.writes += 1
        await asyncio.sleep(0)

    def close(self) -> None:
        self.closed = True


class FakePort:
    """What an Exchange uses of a Port: send(), each packet kept in `sent`."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, pkt: bytes) -> None:
        self.sent.append(pkt)


class Batch:
    def __init__(self) -> None:
        self.acks: list[bytes] = []

    def on_acks(self, pkt: Any) -> None:
        self.acks.append(bytes(pkt))


def _counters() -> dict[str, int]:
    return {"nacks": 0, "bad_packets": 0, "pending_full": 0, "sent_frames": 0}


def _lp(fragment: bytes, **fields: int) -> bytes:
    buf = bytearray(len(fragment) + 64)
    n = lp.encode_lp(buf, 0, fragment, **fields)
    return bytes(buf[:n])


def _acks() -> bytes:
    buf = bytearray(32)
    k = batch.begin(buf, batch.ACKS, 7)
    return bytes(buf[: batch.add_acks(buf, k, [1, 2])])


def test_port_frames_round_trip_in_parts_on_a_byte_stream() -> None:
    async def run() -> None:
        for whole in (False, True):
            link = Link()
            counters = _counters()
            # a link given to a Port is taken whole; a byte stream's goes in parts
            port = Port(counters, link if whole else None, False)
            await port.open(link)
            got: list[bytes] = []
            reader = asyncio.create_task(port.read_loop(
                lambda p, got=got: got.append(bytes(p)), asyncio.Event()))
            pkts = [bytes([k % 251]) * size for k, size in
                    enumerate((1, 200, 253, 254, 255, 600, MAX_PACKET))]
            for pkt in pkts:
                await port.send(pkt)
            assert counters["sent_frames"] == len(pkts)
            assert link.writes > len(pkts) if not whole else link.writes == len(pkts)
            assert framing.FrameDecoder(framing.frame_size_max(MAX_PACKET)).feed(
                bytes(link.out)) == pkts
            for k in range(0, len(link.out), 100):  # the frames read back, in chunks
                link.inbox.put_nowait(bytes(link.out[k : k + 100]))
            async with asyncio.timeout(10):
                while len(got) < len(pkts):
                    await asyncio.sleep(0.001)
            assert got == pkts
            reader.cancel()

    asyncio.run(run())


def test_port_refuses_a_frame_that_waited_while_the_link_closed() -> None:
    async def run() -> None:
        link = Link()
        port = Port(_counters(), None, False)
        await port.open(link)
        first = asyncio.create_task(port.send(b"x" * 600))  # in parts: the link is busy
        await asyncio.sleep(0)
        second = asyncio.create_task(port.send(b"y" * 10))  # waits its turn
        await asyncio.sleep(0)
        port.close()
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(results[1], OSError), results
        assert b"y" not in link.out  # nothing written to the closed link
        try:
            await port.send(b"z")
        except OSError:
            pass
        else:
            raise AssertionError("sent on a closed port")

    asyncio.run(run())


def test_each_codec_packet_type_goes_where_it_belongs() -> None:
    i = interest.encode(NAME, nonce=1)
    d = data.encode(NAME, b"content")
    for pkt, want in ((i, "interest"), (_lp(i), "interest"), (_acks(), "acks"),
                      (_lp(i, nack_reason=lp.NACK_NO_ROUTE), "nack"), (d, "data"),
                      (_lp(d), "data")):
        async def run(pkt: bytes = pkt, want: str = want) -> None:
            got: list[str] = []
            counters = _counters()
            port = FakePort()
            ex = Exchange(port, counters, lambda p: got.append("interest"))
            waiting = asyncio.create_task(ex.express(ex.encode(interest.encode_interest, NAME,
                                                               nonce=1), 30000))
            while not port.sent:
                await asyncio.sleep(0.001)
            b = Batch()
            ex.on_packet(memoryview(pkt), b)
            if b.acks:
                got.append("acks")
            if want in ("data", "nack"):  # the wait ends at once, with its Data or failed
                got.append("data" if await asyncio.wait_for(waiting, 10) is not None
                           else "nack")
            else:
                for _ in range(3):
                    await asyncio.sleep(0)
                assert not waiting.done()
                waiting.cancel()
            assert got == [want], (pkt.hex(), got)
            assert counters["bad_packets"] == 0 and counters["nacks"] == (want == "nack")

        asyncio.run(run())


def test_acks_without_link_batches_are_dropped() -> None:
    counters = _counters()
    Exchange(FakePort(), counters, print).on_packet(memoryview(_acks()), None)
    assert counters == _counters()


def test_unreadable_packets_are_counted_not_raised() -> None:
    good = interest.encode(NAME, nonce=1)
    bad = [b"", b"\x00", b"\x07\x00", b"\xff" * 5, good[:-1], b"\x06\x05\x07\x03abc",
           _lp(b"\x05\x01"), b"\x64\x02\x50\x05", b"\xc1\x00", bytes([0xC1]) + b"\x00" * 9]
    for pkt in bad:
        counters = _counters()
        # a real Batcher reads ACKS (it uses nothing of a node for that)
        Exchange(FakePort(), counters, interest.decode_interest).on_packet(memoryview(pkt),
                                                                            Batcher(None, False))
        assert counters["bad_packets"] == 1, pkt.hex()


def test_a_nack_ends_the_wait_of_the_interest_it_names() -> None:
    async def run() -> None:
        counters = _counters()
        port = FakePort()
        ex = Exchange(port, counters, print)
        t0 = time.monotonic()
        waiting = asyncio.create_task(ex.express(ex.encode(interest.encode_interest, NAME,
                                                           nonce=7), 30000))
        while not port.sent:
            await asyncio.sleep(0.001)
        assert bytes(interest.decode_interest(port.sent[0]).name) in ex.pending
        other = _lp(interest.encode(b"\x08\x05other", nonce=8), nack_reason=150)
        ex.on_packet(memoryview(other), None)
        assert counters["nacks"] == 1 and not waiting.done()  # counted, nothing woken
        ex.on_packet(memoryview(_lp(port.sent[0], nack_reason=lp.NACK_NO_ROUTE)), None)
        assert await asyncio.wait_for(waiting, 10) is None  # a failed fetch, at once
        assert time.monotonic() - t0 < 10 and counters["nacks"] == 2 and not ex.pending

    asyncio.run(run())


def test_outstanding_interests_are_bounded() -> None:
    async def run() -> None:
        counters = _counters()
        ex = Exchange(FakePort(), counters, print)

        async def ask(k: int) -> object:
            # encoded and expressed in one turn: express copies the scratch buffer first
            n = ex.encode(interest.encode_interest, NAME + b"\x08\x01" + bytes([k]), nonce=k)
            return await ex.express(n, 30000)

        tasks = [asyncio.create_task(ask(k)) for k in range(20)]
        await asyncio.sleep(0.01)
        assert len(ex.pending) == 16 and counters["pending_full"] == 4
        assert [await t for t in tasks[16:]] == [None] * 4
        ex.fail_all()  # the link went down: every wait ends, failed
        assert [await asyncio.wait_for(t, 10) for t in tasks[:16]] == [None] * 16

    asyncio.run(run())


def test_lp_is_let_go_only_if_the_exchange_loaded_it() -> None:
    # a fresh interpreter where nothing has loaded lp, as on a board; then one where the
    # host had (its module must stay: others hold its classes)
    code = """
import sys
from pubmote_wire import interest
from pubmote_node.face import Exchange
pre = sys.argv[1] == "pre"
if pre:
    from pubmote_wire import lp as before
frag = interest.encode(b"\\x08\\x01a", nonce=1)
pkt = b"\\x64" + bytes([len(frag) + 2]) + b"\\x50" + bytes([len(frag)]) + frag
seen = []
Exchange(None, {}, seen.append).on_packet(memoryview(pkt), None)
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


def test_the_faces_packet_types_are_the_codecs() -> None:
    # face.py names the packet types as its own const()s (no heap on the board, and lp and
    # batch stay unloaded); they must be the codec's numbers
    src = (ROOT / "firmware/pubmote_node/face.py").read_text()
    expected = {"_T_INTEREST": interest.INTEREST, "_T_DATA": data.DATA,
                "_T_LP_PACKET": lp.LP_PACKET, "_T_ACKS": batch.ACKS, "_T_NAME": 0x07}
    for name, value in expected.items():
        assert "%s = const(0x%02X)" % (name, value) in src, name
