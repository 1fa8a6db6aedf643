"""Who may be and speak for a board, tried as an attacker on the gateway's network would:
readings spoofed in a board's name (from a connection that registered no board, from one
registered as another board, from an NDN app), a board's name taken over by a connection
re-registering it, a name without a key where keys are in force, names that cannot be
names, and a --require-signed realm entered through the ingresses that carry no board
signature (SP, NDN apps, an open mesh realm). Each refused and counted; the genuine
board's readings and commands flow throughout."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from attackers import Genuine, Peer, open_conns, registration

from e2e import (
    Collector,
    Publisher,
    boards_registered,
    bridge_with_boards,
    free_port,
    sp_connected,
    wait_until,
)
from pubmote.core.auth import key_for_board
from pubmote.core.hub import Message
from pubmote_wire import cbor, control, framing, name, notify

BAD_NAMES = ["a/b", "a b", "*", "x|y", "%41", 'q"', "x" * 65, "tab\there"]


def _urls(**extra: Any) -> dict[str, Any]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()], **extra}


def _notify_pkt(publisher: str, topic: str, payload: bytes) -> bytes:
    """A notify Interest with its message inline (nothing to fetch)."""
    pub, t, nonce = name.from_uri(publisher), name.from_uri(topic), os.urandom(4)
    d = bytearray(len(payload) + 256)
    nd = notify.encode_msg_data(d, 0, pub, t, nonce, payload)
    buf = bytearray(len(payload) + 600)
    n = notify.encode_notify_interest(buf, 0, t, pub, nonce, inline=bytes(d[:nd]))
    return bytes(buf[:n])


def _notify(board: str, topic: str, payload: bytes) -> bytes:
    """The same from /pubmote/node/<board>, framed for a board link."""
    return bytes(framing.encode(_notify_pkt("/pubmote/node/" + board, topic, payload)))


def _registration_named(board: str) -> bytes:
    params = cbor.dumps({"name": board, "prefix": "/pubmote/node/x", "filters": [],
                         "serve": []})
    buf = bytearray(len(params) + 256)
    n = control.encode_register(buf, 0, b"x", params, -1, 1500, None, None, None)
    return bytes(framing.encode(bytes(buf[:n])))


def test_spoofed_readings_refused(tmp_path: Path) -> None:
    async def body() -> None:
        port = free_port()
        async with bridge_with_boards(tmp_path, 1, period_ms=200,
                                      **_urls(tcp=["127.0.0.1:%d" % port])) as bridge:
            await boards_registered(bridge, ["sim1"])
            auth = bridge.hub.auth
            assert auth is not None
            g = Genuine(bridge)
            col = Collector(bridge.cfg["sp_pub"][0], b"/pubmote/demo/sim1/")
            peers: list[Peer] = []
            try:
                await sp_connected(bridge)
                await g.served(30)
                forged = [_notify("sim1", "/pubmote/demo/sim1/temperature", b"forged-%d" % i)
                          for i in range(10)]
                # 1. a connection that registered nothing speaks as sim1
                peers += await open_conns(port, ["127.0.0.2"], 1, b"".join(forged[:5]))
                # 2. a connection registered as evil speaks as sim1
                peers += await open_conns(port, ["127.0.0.3"], 1, registration("evil"))
                await boards_registered(bridge, ["evil"], 30)
                peers[-1].write(b"".join(forged[5:]))
                await wait_until(lambda: auth.rejected["spoofed"] >= 10, 30,
                                 "the spoofed notifies refused")
                # 3. an NDN app publishes as a board: its PubSub notify refused, in-process
                hub = bridge.hub
                before = auth.rejected["spoofed"]
                from hub_face import StubFace

                app = StubFace(99, kind="ndn", label="ndn:app")
                hub.on_packet(app, _notify_pkt("/pubmote/node/sim1",
                                               "/pubmote/demo/sim1/temperature", b"forged-app"))
                assert auth.rejected["spoofed"] == before + 1
                await g.served(30)
                assert not [x for x in col.lines if b"forged" in x], "a spoofed reading got out"
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()
                col.close()
                g.close()

    asyncio.run(asyncio.wait_for(body(), 180))


def test_name_takeover_refused(tmp_path: Path) -> None:
    """No keys (boards register by name): a connection re-registering as sim1 every 200
    ms for 12 s never takes the name; every command meant for sim1 reaches sim1."""
    async def body() -> None:
        port = free_port()
        async with bridge_with_boards(tmp_path, 1, period_ms=200,
                                      **_urls(tcp=["127.0.0.1:%d" % port])) as bridge:
            await boards_registered(bridge, ["sim1"])
            auth = bridge.hub.auth
            assert auth is not None and auth.allow_anonymous
            g = Genuine(bridge)
            peers: list[Peer] = []
            try:
                await sp_connected(bridge)
                await g.served(30)
                peers += await open_conns(port, ["127.0.0.4"], 1)
                t_end = time.monotonic() + 12
                served = 0
                while time.monotonic() < t_end:
                    peers[0].write(registration("sim1"))
                    assert bridge.hub.board("sim1").face_kind != "tcp", "sim1 was taken over"
                    if served < 12:
                        await g.served(30)  # a command to sim1 reaches sim1
                        served += 1
                    await asyncio.sleep(0.2)  # the attacker's pace, not a wait
                assert served == 12
                assert auth.rejected["takeover"] >= 10, auth.rejected
                assert bridge.hub.board("sim1").face_kind != "tcp"
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()
                g.close()

    asyncio.run(asyncio.wait_for(body(), 240))


def test_with_keys_a_name_without_one_does_not_register(tmp_path: Path) -> None:
    async def body() -> None:
        keys = tmp_path / "keys.json"
        key = key_for_board(keys, "sim1")
        port = free_port()
        async with bridge_with_boards(tmp_path, 1, period_ms=200, extra={"key": key.hex()},
                                      **_urls(tcp=["127.0.0.1:%d" % port],
                                              keys=str(keys))) as bridge:
            await boards_registered(bridge, ["sim1"])
            auth = bridge.hub.auth
            assert auth is not None and not auth.allow_anonymous
            peers = await open_conns(port, ["127.0.0.5"], 1, registration("intruder"))
            try:
                await wait_until(lambda: auth.rejected["anonymous"] >= 1, 30,
                                 "the keyless registration refused")
                assert bridge.hub.board("intruder") is None
                # names that cannot be names are refused before anything else
                for bad in BAD_NAMES:
                    peers[0].write(_registration_named(bad))
                await wait_until(lambda: bridge.hub.counters["bad_packets"] >= len(BAD_NAMES),
                                 30, "the bad names refused")
                assert set(bridge.hub.board_names()) == {"sim1"}
            finally:
                for p in peers:
                    if p.t is not None:
                        p.t.abort()

    asyncio.run(asyncio.wait_for(body(), 180))


def test_signed_realm_holds_on_every_ingress(tmp_path: Path) -> None:
    """--require-signed /greenhouse: unsigned messages into it through the SP SUB
    endpoint, an NDN app and an open mesh realm are refused; elsewhere they flow."""
    async def body() -> None:
        async with bridge_with_boards(tmp_path, 1, period_ms=200,
                                      **_urls(require_signed=["/greenhouse"])) as bridge:
            await boards_registered(bridge, ["sim1"])
            hub = bridge.hub
            auth = hub.auth
            assert auth is not None
            col = Collector(bridge.cfg["sp_pub"][0], b"/greenhouse/", b"/open/")
            pub = Publisher(bridge.cfg["sp_sub"][0])
            try:
                await sp_connected(bridge)
                for _ in range(100):  # resent until the SUB endpoint has the publisher
                    await pub.send(b"/greenhouse/vent|open")
                    await pub.send(b"/open/vent|open")
                    if col.with_prefix(b"/open/vent|"):
                        break
                    await asyncio.sleep(0.1)
                await col.wait_for(b"/open/vent|open", 1, 30)
                sp_ep = next(ep for ep in bridge.sp if ep.url == bridge.cfg["sp_sub"][0])
                assert sp_ep.counters["refused"] >= 1
                # an NDN app's notify into the realm
                from hub_face import StubFace

                app = StubFace(98, kind="ndn", label="ndn:app2")
                before = auth.rejected["unsigned_ingress"]
                hub.on_packet(app, _notify_pkt("/app/x", "/greenhouse/vent", b"open"))
                assert auth.rejected["unsigned_ingress"] == before + 1
                # the open mesh realm: what the relay would hand the hub is refused first
                assert hub.unsigned_refused(b"/greenhouse/vent", "test")
                assert not hub.unsigned_refused(b"/open/vent", "test")
                hub.publish(Message(b"/open/after", b"1", "x", "test"))
                await wait_until(lambda: hub.counters["messages"] > 0, 10, "relay")
                assert not col.with_prefix(b"/greenhouse/"), "the signed realm was entered"
            finally:
                col.close()
                pub.close()

    asyncio.run(asyncio.wait_for(body(), 180))
