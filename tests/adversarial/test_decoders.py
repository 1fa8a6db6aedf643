"""Hostile payloads through every decoder of peer bytes: nothing a peer sends may end the
bridge (or `pubmote sub`, or the pipeline's compaction).

A generated corpus (nesting of arrays, maps, tags and indefinite items to 10,000 levels,
every class of tag number, bignums of every size class, unterminated indefinite items,
lying lengths, NaN and infinities, text that is not UTF-8, simple values, reserved heads,
rich markup and terminal escapes; bencode of the same kinds; random bytes by hypothesis)
goes (a) into each decoder function, which must return or raise its module's own error,
and (b) end to end into a bridge with a simulated board and its live view drawing: into
the SP SUB endpoint (plain and directed messages), into the gateway mesh as envelopes,
into the DHT node as datagrams, and into `pubmote sub` as a subprocess. After the attack
the bridge still runs, the board's readings still reach an SP subscriber, and the
counters of refused input went up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import json
import math
import os
import pty
import signal
import socket
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Any

import cbor2
import pytest
from attackers import genuine_served
from attackers import run as run_scenario
from corpus import BENCODE, BENCODE_IDS, CBOR, CBOR_IDS, SP_MAX, text
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from scenarios import decoders
from scenarios.decoders import draw, soon, sp_attack

from e2e import (
    Collector,
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    sp_connected,
    wait_until,
)
from pubmote.cli.sub import format_line
from pubmote.core import cbor
from pubmote.dht import bencode, bep44, krpc
from pubmote.gateway import view
from pubmote.gateway.mesh.envelope import Envelope, EnvelopeError
from pubmote.gateway.mesh.relay import DirectedError, parse_directed_payload
from pubmote.pipeline.readings import reading_of

PUBMOTE = str(Path(sys.executable).parent / "pubmote")

# head bytes that make interesting structure, for hypothesis to string together
HEADS = [bytes((b,)) for b in (0x81, 0x82, 0x9F, 0xA1, 0xBF, 0x5F, 0x7F, 0xFF, 0xC2, 0xC6,
                               0xD8, 0x1C, 0x1D, 0xF7, 0xF9, 0xFB, 0x5B, 0x9B, 0x1B, 0x00,
                               0x61, 0x41, 0x20, 0xE0, 0xF8)]
CBOR_LIKE = st.lists(st.sampled_from(HEADS) | st.binary(max_size=4), max_size=80).map(b"".join)
HOSTILE_BYTES = st.binary(max_size=600) | CBOR_LIKE


# ---- (a) each decoder on its own -------------------------------------------------------

def check_subset(v: Any, depth: int = 0) -> None:
    """What the host's CBOR decoder may hand out: the subset's plain types, 64-bit ints,
    nesting within its limit."""
    assert depth <= cbor.MAX_DEPTH + 1
    if isinstance(v, list):
        for x in v:
            check_subset(x, depth + 1)
    elif isinstance(v, dict):
        for k, x in v.items():
            check_subset(k, depth + 1)
            check_subset(x, depth + 1)
    elif isinstance(v, int) and not isinstance(v, bool):
        assert -(1 << 64) <= v < 1 << 64
    else:
        assert v is None or isinstance(v, bool | float | str | bytes), type(v)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return same(list(a), list(b)) and same(list(a.values()), list(b.values()))
    return bool(a == b)


def host_cbor(data: bytes) -> None:
    try:
        v = cbor.loads(data)
    except cbor.CborError:
        return
    check_subset(v)
    assert same(v, cbor2.loads(data))  # what the bounds let through, decoded as before


def shown(data: bytes) -> None:
    s = view.show_payload(data)
    assert isinstance(s, str) and len(s) <= 48 and s.isprintable(), s


def sub_lines(data: bytes) -> None:
    body = b"/t/x|" + data
    line = format_line(body, False)
    assert "\n" not in line and line.isprintable() and line.startswith("/t/x ")
    rec = json.loads(format_line(body, True))
    assert rec["topic"] == "/t/x" and rec["hex"] == data.hex()


def reading(data: bytes) -> None:
    r = reading_of(data.hex())
    assert r is None or (isinstance(r, float) and math.isfinite(r))


def envelope(data: bytes) -> None:
    good = {"v": 1, "t": "/t/x", "p": b"p", "b": "sim1", "g": "gw", "ts": 1, "e": 1, "s": 1}
    fields = b"".join(text(k) + cbor.dumps(v) for k, v in good.items() if k != "p")
    for env in (data,
                b"\xa8" + fields + text("p") + data,  # as the payload field's value
                b"\xa9" + fields + text("p") + b"\x41p" + text("x") + data,  # an extra field
                b"\xa8" + fields + data + b"\x41p"):  # as a key
        try:
            e = Envelope.decode(env)
        except EnvelopeError:
            continue
        assert isinstance(e.payload, bytes) and isinstance(e.topic, str)


def directed(data: bytes) -> None:
    for payload in (data, b"\xa2\x61t\x62/x\x61p" + data, b"\xa1\x61t" + data):
        try:
            topic, body, ts = parse_directed_payload(payload)
        except DirectedError:
            continue
        assert isinstance(topic, str) and isinstance(body, bytes)
        assert ts is None or isinstance(ts, int)


CBOR_DECODERS = [host_cbor, shown, sub_lines, reading, envelope, directed]


@pytest.mark.parametrize("decoder", CBOR_DECODERS, ids=lambda f: f.__name__)
def test_cbor_decoders_on_corpus(decoder: Any) -> None:
    # the whole corpus per decoder, in one test (thousands of test items cost the suite
    # more than the decoding); a failure names the payload
    for case_id, data in zip(CBOR_IDS, (d for _, d in CBOR), strict=True):
        try:
            decoder(data)
        except BaseException as e:
            raise AssertionError("%s on %s: %r" % (decoder.__name__, case_id, e)) from e


@pytest.mark.parametrize("decoder", CBOR_DECODERS, ids=lambda f: f.__name__)
@settings(max_examples=200, deadline=None)
@given(data=HOSTILE_BYTES)
def test_cbor_decoders_on_random_bytes(decoder: Any, data: bytes) -> None:
    decoder(data)


def test_cbor_limits_hold_at_their_edges() -> None:
    ok = b"\x81" * cbor.MAX_DEPTH + b"\x00"
    assert cbor.loads(ok) is not None
    for bad in (b"\x81" * (cbor.MAX_DEPTH + 1) + b"\x00",
                b"\x9a" + cbor.MAX_ITEMS.to_bytes(4, "big") + b"\x00" * cbor.MAX_ITEMS):
        with pytest.raises(cbor.CborError):
            cbor.loads(bad)
    n = cbor.MAX_ITEMS - 1  # the array itself is one item
    assert len(cbor.loads(b"\x9a" + n.to_bytes(4, "big") + b"\x00" * n)) == n


def dht_decoders(data: bytes) -> None:
    try:
        bencode.decode(data)
    except bencode.BencodeError:
        pass
    try:
        msg = krpc.parse(data)
    except krpc.KrpcError:
        return
    for fields in (msg.args, msg.body):
        for salt in (b"", b"s" * 65):
            with contextlib.suppress(krpc.KrpcError):
                bep44.item_from_fields(fields, salt)
        with contextlib.suppress(krpc.KrpcError):
            bep44.put_item(fields)
    msg.error()


def test_dht_decoders_on_corpus() -> None:
    for case_id, data in zip(BENCODE_IDS, (d for _, d in BENCODE), strict=True):
        try:
            dht_decoders(data)
        except BaseException as e:
            raise AssertionError("DHT decoders on %s: %r" % (case_id, e)) from e


BENCODE_LIKE = st.lists(st.sampled_from([b"l", b"d", b"e", b"i", b"0", b"1:", b"2:ab", b"-",
                                         b"9", b"i0e", b"20:" + b"N" * 20]),
                        max_size=80).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600) | BENCODE_LIKE)
def test_dht_decoders_on_random_bytes(data: bytes) -> None:
    dht_decoders(data)


def test_pipeline_compacts_a_journal_of_hostile_payloads(tmp_path: Path) -> None:
    """The journal keeps whatever a peer published (as hex): the pipeline's compaction
    reads it into typed columns, a hostile payload being a row without a reading."""
    from pubmote.pipeline.columns import read_journal_file

    f = tmp_path / "journal-000001.jsonl"
    good = cbor.dumps({"celsius": 21.5})
    lines = [{"t_bridge": i, "topic": "/t/x", "outcome": "relayed", "payload": d.hex()}
             for i, (_, d) in enumerate([*CBOR, ("good", good)])]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = read_journal_file(f).to_pylist()
    assert len(rows) == len(lines) and rows[-1]["reading"] == 21.5
    assert all(r["reading"] is None or math.isfinite(r["reading"]) for r in rows)


# ---- (b) end to end --------------------------------------------------------------------

def sp_urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


async def readings_continue(sub: Collector, count: int = 3, timeout_s: float = 30) -> None:
    """The simulated board's readings still reach the SP subscriber: `count` more."""
    prefix = b"/pubmote/demo/sim1/"
    before = len(sub.with_prefix(prefix))
    await sub.wait_for(prefix, before + count, timeout_s)


def test_sp_payloads_into_bridge_with_live_view(tmp_path: Path) -> None:
    """Every payload of the corpus on one SP topic, the view drawn after each; directed
    messages (CBOR maps around each payload) and malformed SP lines among them."""
    r = run_scenario(decoders.hostile_cbor(tmp_path), 240)
    genuine_served(r)
    n = r["payloads"]
    assert r["sp_received"] == 2 * n and r["drawn"] == 2 * n, r
    assert r["bad_messages"] == len(decoders.MALFORMED), r
    assert r["relayed"] == n, r
    assert r["tasks_done"] == 0, r  # none of the bridge's tasks ended
    # every directed message accounted for: delivered, or refused and counted
    assert r["directed_bad"] + r["directed_local"] == n, r
    assert r["directed_bad"] > n // 2, r
    assert r["internal_errors"] == 0, r


class _Pty:
    """A terminal for a child process: its output drained (and kept) in the background."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 140, 0, 0))
        self.out = bytearray()
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            return
        self.out += data
        del self.out[:-200_000]  # the tail is enough to tell what happened

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        os.close(self.master)
        os.close(self.slave)


def test_bridge_process_with_view_survives(tmp_path: Path) -> None:
    """`pubmote bridge --view` on a terminal (what `make run` starts), attacked through
    its SP SUB endpoint: the process keeps running and relaying."""
    picked = ("self-ref-list", "bignum-tag2-2048B", "tag-depth-10000", "array-depth-10000",
              "markup-raw", "markup-text", "terminal-escape-raw", "fraction-of-bignums",
              "indef-array-unterminated", "double-nan", "bad-utf8-1", "tag-55799-map")
    attack = [d for n, d in CBOR if n in picked]
    assert len(attack) == len(picked)

    async def run() -> None:
        urls = sp_urls()
        term = _Pty()
        err = open(tmp_path / "stderr", "wb")  # noqa: SIM115 - closed below
        p = await asyncio.create_subprocess_exec(
            PUBMOTE, "bridge", "--sim-boards", "1", "--sim-period-ms", "200",
            "--sim-dir", str(tmp_path), "--sp-pub", urls["sp_pub"][0],
            "--sp-sub", urls["sp_sub"][0], "--view",
            stdin=asyncio.subprocess.DEVNULL, stdout=term.slave, stderr=err)
        sub = Collector(urls["sp_pub"][0], b"/pubmote/", b"/attack/")
        pub = Publisher(urls["sp_sub"][0])
        try:
            await sub.wait_for(b"/pubmote/demo/sim1/", 2, 90)
            for i, payload in enumerate(attack):
                # relayed to the subscriber: the hub has it, the view draws it next turn.
                # Sent again each second: SP PUB drops what it sends before its connection
                # is up, and nothing says when that is
                deadline = time.monotonic() + 90
                while not sub.with_prefix(b"/attack/%d|" % i):
                    assert time.monotonic() < deadline, "attack %d never relayed" % i
                    await pub.send(b"/attack/%d|" % i + payload)
                    with contextlib.suppress(AssertionError):
                        await sub.wait_for(b"/attack/%d|" % i, 1, 1)
            # readings for a few more view refreshes (every 0.5 s)
            await readings_continue(sub, 10)
            assert p.returncode is None, (tmp_path / "stderr").read_text()[-3000:]
            assert b"attack" in term.out
        finally:
            sub.close()
            pub.close()
            if p.returncode is None:
                p.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(p.wait(), 30)
                except TimeoutError:
                    p.kill()
                    await p.wait()
            err.close()
            term.close()
        assert "Traceback" not in (tmp_path / "stderr").read_text()

    asyncio.run(asyncio.wait_for(run(), 240))


def test_live_view_contains_a_failing_row_and_render(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug drawing one row, or a whole screen, is counted and the view goes on."""
    from pubmote.core.hub import Message

    real = view.show_payload

    def flaky(payload: bytes, limit: int = 48) -> str:
        if payload == b"boom":
            raise RuntimeError("a bug in the view")
        return real(payload, limit)

    monkeypatch.setattr(view, "show_payload", flaky)

    async def run() -> None:
        async with bridge_with_boards(tmp_path, 0) as bridge:
            v = view.View(bridge)
            out = io.StringIO()
            task = asyncio.create_task(v.run(0.02, Console(file=out, force_terminal=True)))
            bridge.hub.publish(Message(b"/t/ok", b"fine", "test", "test"))
            bridge.hub.publish(Message(b"/t/bad", b"boom", "test", "test"))
            await wait_until(lambda: v.counters["row_errors"] >= 2, 10, "rows failing")
            real_render = v.render
            fails = [1]

            def render_once_broken() -> Any:
                if fails:
                    fails.pop()
                    raise RuntimeError("a bug in render")
                return real_render()

            v.render = render_once_broken  # type: ignore[method-assign]
            await wait_until(lambda: v.counters["render_errors"] == 1, 10, "a failed render")
            n = v.counters["renders"]
            await wait_until(lambda: v.counters["renders"] > n + 2, 10, "renders after it")
            assert not task.done()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert "/t/ok" in out.getvalue() and "row not shown" in out.getvalue()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_hub_counts_failing_listeners_hooks_and_packets() -> None:
    from pubmote.core.hub import Hub, Message

    async def run() -> None:
        hub = Hub(gateway="gw")
        got: list[Message] = []

        def broken(msg: Message) -> None:
            raise ValueError("a listener's bug")

        def broken_hook(msg: Message) -> bool:
            raise RecursionError("a hook's bug")

        hub.add_listener(broken)
        hub.add_listener(got.append)
        hub.add_publish_hook(broken_hook)
        for i in range(5):
            hub.publish(Message(b"/t/%d" % i, b"x", "test", "test"))
        s = hub.stats()
        assert len(got) == 5 and s["listener_errors"] == 5 and s["hook_errors"] == 5

        def broken_decoder(face: Any, pkt: bytes) -> None:
            raise IndexError("a decoder's bug")

        hub._on_interest = broken_decoder  # type: ignore[method-assign]

        class Face:  # an application's face (no board behind it)
            label = "test"
            kind = "tcp"
            board = None

        hub.on_packet(Face(), b"\x05\x00")  # type: ignore[arg-type]
        assert hub.stats()["packet_errors"] == 1

        async def failing() -> None:
            raise KeyError("a task's bug")

        t = hub._tasks.spawn(failing())
        with contextlib.suppress(KeyError):
            await t
        await asyncio.sleep(0)
        assert hub.stats()["task_errors"] == 1
        await hub.close()

    asyncio.run(run())


def test_a_failing_handler_closes_only_that_connection(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug on one peer's input (SP publisher, board TCP link) costs that connection:
    counted, closed; the board and the other clients are served on."""
    from pubmote.faces import fastframe
    from pubmote.faces.sp import SpEndpoint

    real_on_message = SpEndpoint.on_message

    def on_message(self: SpEndpoint, conn: Any, body: bytes) -> None:
        if body.startswith(b"/boom"):
            raise RuntimeError("a handler's bug")
        real_on_message(self, conn, body)

    monkeypatch.setattr(SpEndpoint, "on_message", on_message)
    real_feed = fastframe.Deframer.feed

    def feed(self: fastframe.Deframer, chunk: bytes) -> list[bytes]:
        if b"boom" in chunk:
            raise RuntimeError("a deframer's bug")
        return real_feed(self, chunk)

    monkeypatch.setattr(fastframe.Deframer, "feed", feed)

    async def run() -> None:
        urls = sp_urls()
        tcp = "127.0.0.1:%d" % free_port()
        async with bridge_with_boards(tmp_path, 1, period_ms=200, tcp=[tcp], **urls) as bridge:
            sub = Collector(urls["sp_pub"][0], b"/pubmote/", b"/fine")
            pub = Publisher(urls["sp_sub"][0])
            try:
                await boards_registered(bridge, ["sim1"])
                await sp_connected(bridge)
                ep = next(e for e in bridge.sp if e.url == urls["sp_sub"][0])
                await pub.send(b"/boom|x")
                await wait_until(lambda: ep.counters["errors"] == 1, 10, "the SP failure")
                # nng redials; the new connection is served
                await pub.send(b"/fine|after")
                with contextlib.suppress(AssertionError):
                    await sub.wait_for(b"/fine|", 1, 3)
                while not sub.with_prefix(b"/fine|"):
                    await sp_connected(bridge)
                    await pub.send(b"/fine|after")
                    with contextlib.suppress(AssertionError):
                        await sub.wait_for(b"/fine|", 1, 2)
                host, port = tcp.split(":")
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"\x00boom\x00")
                await asyncio.wait_for(reader.read(), 10)  # to the end: closed by the bridge
                writer.close()
                assert sum(f.counters.get("rx_errors", 0) for f in bridge.faces) <= 1
                await readings_continue(sub)
                assert bridge.internal_errors() >= 2
                assert "internal errors" in bridge.status()
            finally:
                sub.close()
                pub.close()

    asyncio.run(asyncio.wait_for(run(), 120))


def test_mesh_envelopes_with_hostile_bytes(tmp_path: Path) -> None:
    """A realm member publishes into the gateway mesh: the corpus as envelope bytes
    (refused), inside an envelope's fields (refused), and as the payload of well-formed
    envelopes (relayed to the hub, drawn by the view)."""
    from pubmote.gateway.mesh.realm import PUB, gossip_topic
    from pubmote.p2p import Host, KeyPair
    from pubmote.p2p.pubsub.router import GossipSub

    attack = [d for _, d in CBOR if len(d) <= SP_MAX]
    topic = gossip_topic("pubmote", PUB, "*")

    def wrapped(data: bytes) -> bytes:
        good = {"v": 1, "t": "/attack/m", "b": "x", "g": "attacker", "ts": 1, "e": 1, "s": 1}
        return b"\xa8" + b"".join(text(k) + cbor.dumps(v) for k, v in good.items()) \
            + text("p") + data

    async def run() -> None:
        urls = sp_urls()
        async with bridge_with_boards(tmp_path, 1, period_ms=200,
                                      mesh_listen=["/ip4/127.0.0.1/tcp/0"],
                                      mesh_key_file=str(tmp_path / "gw.key"),
                                      sp_pub=urls["sp_pub"]) as bridge:
            sub = Collector(urls["sp_pub"][0], b"/pubmote/", b"/attack/")
            host = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
            try:
                await boards_registered(bridge, ["sim1"])
                m = bridge.mesh
                addr = m.host.listen_addrs[0].with_p2p(str(m.host.peer_id))
                async with host, GossipSub(host) as gs:
                    gs.subscribe(topic, lambda msg: None)
                    await host.connect(addr)
                    await wait_until(lambda: len(gs.mesh_peers(topic)) >= 1, 15, "a mesh")
                    for seq, data in enumerate(attack, 1):
                        env = Envelope(topic="/attack/m", payload=data, board="x",
                                       gateway="attacker", ts_ms=1, epoch=1, seq=seq)
                        await gs.publish(topic, env.encode())
                        await soon(lambda n=seq: m.counters["in"] >= n,
                                   "envelope %d at the bridge" % seq)
                        assert "/attack/m" in draw(bridge)
                assert m.counters["in"] == len(attack), m.counters
                # refused envelopes cost their sender its score (three and it is ignored):
                # two from each of a few more members
                v = m.validators.counters
                bad = [d for n, d in CBOR if n in ("self-ref-list", "bignum-tag2-2048B",
                                                   "tag-depth-10000", "array-depth-1000")]
                for data in bad:
                    other = Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"])
                    async with other, GossipSub(other) as gs2:
                        gs2.subscribe(topic, lambda msg: None)
                        await other.connect(addr)
                        await wait_until(lambda g=gs2: len(g.mesh_peers(topic)) >= 1, 15,
                                         "a mesh")
                        before = v["bad_envelopes"]
                        await gs2.publish(topic, data)           # not an envelope
                        await gs2.publish(topic, wrapped(data))  # in the payload field
                        await wait_until(lambda b=before: v["bad_envelopes"] == b + 2, 20,
                                         "two refused envelopes")
                await wait_until(lambda: len(sub.with_prefix(b"/attack/m|")) == len(attack),
                                 20, "the mesh's messages at the SP subscriber")
                await readings_continue(sub)
                assert bridge.internal_errors() == 0, bridge.hub.stats()
            finally:
                sub.close()

    asyncio.run(asyncio.wait_for(run(), 240))


def test_dht_node_on_hostile_datagrams() -> None:
    """The corpus (bencode and CBOR alike) as datagrams to a DHT node: counted as
    malformed or answered with an error; the node answers a genuine ping after."""
    from pubmote.dht.node import DhtNode

    attack = [d for _, d in BENCODE + CBOR if len(d) <= 1400]

    async def run() -> None:
        async with DhtNode(host="127.0.0.1", rate_per_s=1e6, rate_burst=1e6) as node, \
                DhtNode(host="127.0.0.1") as peer:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                for i in range(0, len(attack), 20):
                    # 20 at a time: loopback UDP drops what overflows the socket buffer
                    batch = attack[i:i + 20]
                    for _ in range(5):
                        want = node.counters["rx_msgs"] + len(batch)
                        for data in batch:
                            s.sendto(data, node.addr)
                        with contextlib.suppress(AssertionError):
                            await wait_until(lambda w=want: node.counters["rx_msgs"] >= w, 2,
                                             "datagrams %d.. at the node" % i)
                            break
                    else:
                        raise AssertionError("datagrams %d.. never arrived" % i)
            finally:
                s.close()
            assert await peer.ping(node.addr) == node.node_id
            c = node.stats()
            assert c["malformed"] > len(attack) // 2, c
            assert c["rx_failed"] == 0 and c["handler_failed"] == 0, c
            # a bug on the answer path (not a query's handler): contained and counted
            real = node.transactions.resolve

            def broken(msg: Any, addr: Any) -> bool:
                raise RuntimeError("a bug")

            node.transactions.resolve = broken  # type: ignore[method-assign]
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.sendto(krpc.encode_response(b"zz", {b"id": b"N" * 20}), node.addr)
                await wait_until(lambda: node.counters["rx_failed"] == 1, 10, "the failure")
            finally:
                s.close()
            node.transactions.resolve = real  # type: ignore[method-assign]
            assert await peer.ping(node.addr) == node.node_id

    asyncio.run(asyncio.wait_for(run(), 60))


def test_pubmote_sub_prints_hostile_payloads_and_goes_on(tmp_path: Path) -> None:
    """`pubmote sub` (text and --json) against a bridge relaying the corpus: one line per
    message, each payload shown, the board's readings after it."""
    attack = sp_attack()

    async def run() -> None:
        urls = sp_urls()
        async with bridge_with_boards(tmp_path, 1, period_ms=200, **urls) as bridge:
            ep = next(e for e in bridge.sp if e.url == urls["sp_sub"][0])
            procs = [await asyncio.create_subprocess_exec(
                PUBMOTE, "sub", urls["sp_pub"][0], "/attack/", "/pubmote/demo/sim1/",
                *extra, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=1 << 20)  # a 60 kB payload in hex, twice in --json, is one line
                for extra in ((), ("--json",))]
            pub = Publisher(urls["sp_sub"][0])
            readers: list[asyncio.Task[None]] = []
            try:
                outs: list[list[str]] = [[], []]

                async def read(i: int) -> None:
                    stream = procs[i].stdout
                    assert stream is not None
                    while line := await stream.readline():
                        outs[i].append(line.decode())

                def attack_lines(i: int) -> list[str]:
                    if i == 0:
                        return [x for x in outs[0] if x.startswith("/attack/")]
                    return [x for x in outs[1] if json.loads(x)["topic"].startswith("/attack/")]

                readers += [asyncio.create_task(read(i)) for i in range(2)]
                # both subscribers print a reading: they are connected
                await wait_until(lambda: all(any("/pubmote/demo/sim1/" in x for x in o)
                                             for o in outs), 60, "readings at both subs")
                await sp_connected(bridge)
                for i, (_name, payload) in enumerate(attack):
                    await pub.send(b"/attack/%d|" % i + payload)
                    # one at a time: an nng PUB socket drops what its queue cannot hold
                    await soon(lambda n=i + 1: ep.counters["received"] >= n,
                               "the bridge to take message %d" % i)
                await wait_until(lambda: all(len(attack_lines(i)) == len(attack)
                                             for i in range(2)), 60, "every attack line")
                n = [len(o) for o in outs]
                await wait_until(lambda: all(len(outs[i]) >= n[i] + 3 for i in range(2)), 30,
                                 "readings after the attack")
                assert all(p.returncode is None for p in procs)
                recs = [json.loads(x) for x in attack_lines(1)]
                for i, (_name, payload) in enumerate(attack):
                    assert recs[i]["topic"] == "/attack/%d" % i
                    assert recs[i]["hex"] == payload.hex()
                    assert attack_lines(0)[i].startswith("/attack/%d " % i)
            finally:
                pub.close()
                for r in readers:
                    r.cancel()
                for p in procs:
                    if p.returncode is None:
                        p.terminate()
                    assert p.stderr is not None
                    err = await asyncio.wait_for(p.stderr.read(), 30)
                    await asyncio.wait_for(p.wait(), 30)
                    assert b"Traceback" not in err, err[-2000:]

    asyncio.run(asyncio.wait_for(run(), 240))
