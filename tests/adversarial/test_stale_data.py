"""Stale data: a board that restarts is handed its retained last values again (it lost
them), however it comes back (same face or another); one that only re-registers is not
handed them twice. And a BEP 50 overlay member that missed a put catches up by itself:
the publisher retries the members it could not reach, and every member asks its overlay
for newer values in its upkeep, so nobody stays stale until the next publish. The
restarted board's scenario: tests/adversarial/scenarios/stale.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from attackers import run as run_scenario
from scenarios import stale

from e2e import wait_until
from pubmote.dht import bep44
from pubmote.dht.bep50 import TopicOverlay
from pubmote.dht.node import DhtNode


def run(coro_fn: Callable[[], Awaitable[None]], timeout_s: float = 60) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), timeout_s))


def test_restarted_board_is_handed_retained_values_again(tmp_path: Path) -> None:
    r = run_scenario(stale.retained_reboot(tmp_path), 60)
    for i, (face, boot, handed, want) in enumerate(r["handed"]):
        assert handed == want, "case %d: face %d, start-up %s: handed %d times" % (
            i, face, boot, handed)
    # a board that sends no start-up number is known by its face
    assert r["b2"] == [1, 2], r["b2"]
    assert r["given_to_boards"] == 5, r
    assert r["recovery_s"] is not None and r["within_bound"], r


async def _pair(host_a: str, host_b: str, **kw_b: Any) -> tuple[DhtNode, DhtNode]:
    a = DhtNode(host=host_a, port=0, query_timeout_s=0.3)
    b = DhtNode(host=host_b, port=0, query_timeout_s=0.3)
    await a.start()
    await b.start()
    return a, b


def _deaf(node: DhtNode) -> Callable[[bool], None]:
    """Make node drop every datagram it receives while the switch is on (a member whose
    network is away); returns the switch."""
    state = {"deaf": False}
    real = node.datagram_received

    def received(data: bytes, addr: Any) -> None:
        if not state["deaf"]:
            real(data, addr)

    node.datagram_received = received  # type: ignore[method-assign]

    def switch(on: bool) -> None:
        state["deaf"] = on
    return switch


def test_member_that_missed_a_put_is_retried_by_the_publisher() -> None:
    async def body() -> None:
        a, b = await _pair("127.0.5.1", "127.0.5.2")
        kp = bep44.KeyPair.generate()
        try:
            ov_a = TopicOverlay(a, kp.public, b"t")
            ov_b = TopicOverlay(b, kp.public, b"t", refresh_s=3600)  # no pull: the push only
            await ov_a.join(seeds=[])
            await ov_b.join(seeds=[a.addr])
            await ov_a.publish(bep44.sign_item(kp, b"v1", 1, b"t"))
            await wait_until(lambda: ov_b.item is not None and ov_b.item.seq == 1, 10, "v1")
            deaf = _deaf(b)
            deaf(True)
            await ov_a.publish(bep44.sign_item(kp, b"v2", 2, b"t"))  # times out at b
            assert ov_a.counters["forward_failed"] >= 1 and ov_b.item.seq == 1
            deaf(False)
            await wait_until(lambda: ov_b.item is not None and ov_b.item.seq == 2, 15,
                             "the member that missed v2 to get it without a new publish")
            assert ov_a.counters["catch_up_puts"] >= 1
        finally:
            await a.close()
            await b.close()

    run(body)


def test_member_that_missed_a_put_asks_for_it_in_its_upkeep() -> None:
    async def body() -> None:
        a, b = await _pair("127.0.5.3", "127.0.5.4")
        kp = bep44.KeyPair.generate()
        try:
            ov_a = TopicOverlay(a, kp.public, b"t", catch_up_s=())  # no retried push
            ov_b = TopicOverlay(b, kp.public, b"t", refresh_s=1.0)
            await ov_a.join(seeds=[])
            await ov_b.join(seeds=[a.addr])
            deaf = _deaf(b)
            deaf(True)
            await ov_a.publish(bep44.sign_item(kp, b"v1", 1, b"t"))
            assert ov_b.item is None
            deaf(False)
            await wait_until(lambda: ov_b.item is not None and ov_b.item.seq == 1, 15,
                             "the member to fetch v1 in its upkeep")
            assert ov_a.counters["catch_up_puts"] == 0
        finally:
            await a.close()
            await b.close()

    run(body)
