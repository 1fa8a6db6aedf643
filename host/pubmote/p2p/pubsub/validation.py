"""Message validation: validators per topic or topic prefix (sync or async), run on
every message before it is delivered or forwarded; the strictest result wins, and a
validator that fails or answers nonsense counts as IGNORE."""

from __future__ import annotations

import asyncio
import inspect
import logging

from pubmote.p2p.pubsub.messages import ACCEPT, IGNORE, RANK, GossipMessage, Validator

log = logging.getLogger("pubmote.p2p.pubsub")


class Validators:
    """The validator registry and its run (failures counted in validator_errors)."""

    def __init__(self, counters: dict[str, int]) -> None:
        self._counters = counters
        self._validators: dict[str, Validator] = {}
        self._prefix_validators: dict[str, Validator] = {}

    def add(self, topic: str, fn: Validator, *, prefix: bool = False) -> None:
        """Validate messages on `topic` (or on every topic starting with it when `prefix`).

        `fn(msg)` returns (or resolves to) "accept", "reject" (dropped, the forwarding
        peer is penalised), "ignore" (dropped, no penalty) or "throttle" (not standard
        libp2p: dropped like "ignore" and counted against the forwarding peer in
        `counters["throttled"]` and its per-peer throttle count, without penalty). When
        several validators match, the strictest result wins. An exception counts as
        "ignore".
        """
        (self._prefix_validators if prefix else self._validators)[topic] = fn

    def remove(self, topic: str, *, prefix: bool = False) -> None:
        (self._prefix_validators if prefix else self._validators).pop(topic, None)

    def covers(self, topic: str) -> bool:
        if topic in self._validators:
            return True
        return any(topic.startswith(p) for p in self._prefix_validators)

    async def validate(self, gm: GossipMessage) -> str:
        fns: list[Validator] = [v for p, v in self._prefix_validators.items()
                                if gm.topic.startswith(p)]
        exact = self._validators.get(gm.topic)
        if exact is not None:
            fns.append(exact)
        worst = ACCEPT
        for fn in fns:
            try:
                r = fn(gm)
                if inspect.isawaitable(r):
                    r = await r
            except asyncio.CancelledError:
                raise
            except Exception:
                self._counters["validator_errors"] += 1
                log.exception("gossipsub: validator for %s failed", gm.topic)
                r = IGNORE
            if r not in RANK:
                self._counters["validator_errors"] += 1
                r = IGNORE
            if RANK[str(r)] > RANK[worst]:
                worst = str(r)
        return worst
