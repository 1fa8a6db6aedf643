"""Retained topics across two bridges over the DHT: a board on gateway A publishes on a
retained topic; gateway B starts later and gets the last value at once (its board, which
subscribes as to any topic, receives it); A's next value is pushed to B through the topic's
BEP 50 overlay (an incoming put at B, no polling)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from e2e import Collector, Publisher, boards_registered, bridge_with_boards, free_port, wait_until
from pubmote.dht.node import DhtNode

TOPIC = "/site/temp"


def _urls() -> dict[str, list[str]]:
    return {"sp_pub": ["tcp://127.0.0.1:%d" % free_port()],
            "sp_sub": ["tcp://127.0.0.1:%d" % free_port()]}


@pytest.mark.timeout(300)
def test_late_gateway_gets_last_value_then_pushed_updates(tmp_path: Path) -> None:
    async def run() -> None:
        # the nodes' own 2 s query timeout: on a loaded machine a put answered after a
        # shorter one was a forward lost, and B never heard of the update
        boot = DhtNode(host="127.0.0.1", port=0, query_timeout_s=2.0)
        await boot.start()
        dht = {"retained": [TOPIC], "dht_host": "127.0.0.1",
               "dht_bootstrap": ["127.0.0.1:%d" % boot.port], "dht_timeout_s": 2.0}
        key = tmp_path / "gw.key"
        urls_a, urls_b = _urls(), _urls()
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        try:
            async with bridge_with_boards(tmp_path / "a", 1, app="probe_app", gateway="gwa",
                                          dht_key_file=str(key), **dht, **urls_a) as a:
                await boards_registered(a, ["sim1"])
                pub_a = Publisher(urls_a["sp_sub"][0])
                assert a.retained is not None
                try:
                    # the board on A publishes on the retained topic
                    async def board_publishes(value: bytes, n: int) -> None:
                        for _ in range(100):  # resent until the board is subscribed to ctl
                            await pub_a.send(b"/test/sim1/ctl|pub:%s|%s"
                                             % (TOPIC.encode(), value))
                            try:
                                await wait_until(
                                    lambda: a.retained.counters["published"] >= n, 0.5,
                                    "A to publish %r on the DHT" % value)
                                return
                            except AssertionError:
                                continue
                        raise AssertionError("board on A never published")

                    await board_publishes(b"21.5 C", 1)
                    pubkey = a.retained.pubkey.hex()
                    # gateway B starts only now, following A's key; its board watches the topic
                    # and echoes what it gets. B's subscriber dials first (pynng redials every
                    # 20-50 ms until B listens): the board echoes the value as soon as it
                    # registers, and a subscriber dialled after B started could miss that
                    col = Collector(urls_b["sp_pub"][0], b"/test/sim1/got|")
                    t0 = time.monotonic()
                    async with bridge_with_boards(
                            # a board slow to fetch under load gets its retries, not a drop
                            tmp_path / "b", 1, app="probe_app", gateway="gwb", dht_pubkey=pubkey,
                            timeout_ms=5000,
                            extra={"watch": [TOPIC], "echo": True}, **dht, **urls_b) as b:
                        started_s = time.monotonic() - t0
                        assert b.retained is not None
                        last = b.retained.last(TOPIC.encode())
                        # at once: the value is there when the bridge has started
                        assert last is not None and last.value() == b"21.5 C"
                        try:
                            await boards_registered(b, ["sim1"])
                            await col.wait_for(b"/test/sim1/got|/site/temp|21.5 C", 1,
                                               timeout_s=60)
                            puts_before = b.retained.node.methods_in["put"]
                            gets_sent_before = b.retained.node.transactions.counters["sent"]
                            t1 = time.monotonic()
                            await board_publishes(b"22.0 C", 2)
                            await wait_until(
                                lambda: b.retained.counters["received"] >= 2, 30,
                                "B to get the pushed update")
                            push_ms = (time.monotonic() - t1) * 1000
                            await col.wait_for(b"/test/sim1/got|/site/temp|22.0 C", 1,
                                               timeout_s=60)
                            # the board registered after the value arrived (the bridge
                            # handed it the last value at registration) or before (it got
                            # it relayed): once either way, and all of it before the update
                            assert len(col.with_prefix(
                                b"/test/sim1/got|/site/temp|21.5 C")) == 1
                            # pushed: it came as a put to B's node; B asked nothing to get it
                            assert b.retained.node.methods_in["put"] > puts_before
                            assert (b.retained.node.transactions.counters["sent"]
                                    == gets_sent_before)
                            print("late gateway: started with the last value in %.2f s; "
                                  "update pushed in %.0f ms" % (started_s, push_ms))
                        finally:
                            col.close()
                finally:
                    pub_a.close()
        finally:
            await boot.close()

    asyncio.run(asyncio.wait_for(run(), 280))


def test_retained_rules_on_one_gateway(tmp_path: Path) -> None:
    """Which messages become DHT items: retained topics only (exact or under a prefix
    ending in /), never what came from the DHT or another gateway, never over BEP 44's size; a gateway with
    only the public key follows but cannot publish."""
    from pubmote.core.hub import Hub, Message
    from pubmote.dht import bep44
    from pubmote.gateway.retained import INGRESS, RetainedTopics, from_config, salt_of

    async def run() -> None:
        hub = Hub()
        key = bep44.KeyPair.generate()
        rt = RetainedTopics(hub, ["/site/temp", "/site/alerts/"], key=key, host="127.0.0.1",
                            query_timeout_s=0.3)
        await rt.start()
        try:
            assert rt.retained(b"/site/temp") and rt.retained(b"/site/alerts/door")
            assert not rt.retained(b"/site/temperature") and not rt.retained(b"/site/alerts")
            hub.publish(Message(b"/site/temp", b"x" * 997, "b1", "serial"))  # 1001 bencoded
            hub.publish(Message(b"/other", b"1", "b1", "serial"))
            hub.publish(Message(b"/site/temp", b"from the dht", "dht:x", INGRESS))
            await wait_until(lambda: rt.counters["too_big"] == 1, 30, "the oversize refusal")
            # another gateway's message, relayed by the mesh: that gateway puts it, not us
            hub.publish(Message(b"/site/alerts/window", b"shut", "gw2/b7", "mesh"))
            hub.publish(Message(b"/site/alerts/door", b"open", "b1", "serial"))
            await wait_until(lambda: rt.counters["published"] == 1, 30, "the publish")
            assert rt.last(b"/site/alerts/window") is None
            item = rt.last(b"/site/alerts/door")
            assert item is not None and item.value() == b"open"
            assert item.salt == b"/site/alerts/door" and item.key == key.public
            assert item.seq > 1_600_000_000_000  # the clock in ms: restarts never go back
            assert len(salt_of(b"/" + b"x" * 80)) == 20  # long topics: SHA-1 as the salt
        finally:
            await rt.close()
        assert not hub.has_listener(rt._on_message)
        follower = RetainedTopics(hub, ["/site/temp"], key=None, pubkey=key.public,
                                  host="127.0.0.1")
        await follower.start()
        try:
            hub.publish(Message(b"/site/temp", b"1", "b1", "serial"))
            assert follower.counters["no_key"] == 1
        finally:
            await follower.close()
        try:
            await from_config(hub, {"retained": ["/t"], "dht_key_file": None,
                                    "dht_pubkey": None})
        except ValueError:
            pass
        else:
            raise AssertionError("retained topics without a key were accepted")
        await hub.close()

    asyncio.run(asyncio.wait_for(run(), 30))
