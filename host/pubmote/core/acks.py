"""When acks leave: after everything relayed in the same loop turn has been written to its
subscribers' sockets (the relays' flushers), so that acked means handed on
(docs/guarantees.md). Also the hub's intake gate: once closed, nothing more is acked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pubmote.core.registry import HubFace

log = logging.getLogger("pubmote.hub")


class AckGate:
    """Acks held to the end of the loop turn, behind the turn's relay flushes."""

    def __init__(self) -> None:
        self.open = True  # False once the bridge stops: nothing new is taken in
        self._flushers: list[Callable[[], None]] = []
        self._acks: list[tuple[HubFace, bytes]] = []  # drained every turn
        self._flush_due = False

    def ack_after_relay(self, face: HubFace, pkt: bytes) -> None:
        """Send an ack (a notify's, a batch's ACKS) once everything relayed so far has been
        written to every connected subscriber's socket (or its buffer there). Once the
        gate is closed, nothing more is acked."""
        if not self.open:
            return
        self._acks.append((face, pkt))
        self.flush_soon()

    def add_flusher(self, fn: Callable[[], None]) -> None:
        """fn writes what a relay queued this turn (an SP PUB endpoint's flush); it runs at
        the end of every turn that relayed or acked something, before the acks."""
        self._flushers.append(fn)

    def remove_flusher(self, fn: Callable[[], None]) -> None:
        if fn in self._flushers:
            self._flushers.remove(fn)

    def flush_soon(self) -> None:
        """Have flush_relays run at the end of this loop turn (once, however many ask)."""
        if self._flush_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside a loop (a unit test): at once
            self.flush_relays()
            return
        self._flush_due = True
        loop.call_soon(self.flush_relays)

    def flush_relays(self) -> None:
        """Write what this turn relayed to the subscribers' sockets, then send the acks."""
        self._flush_due = False
        for fn in self._flushers:
            try:
                fn()
            except Exception:  # one broken endpoint must not hold back acks
                log.exception("flushing a relay failed")
        acks, self._acks = self._acks, []
        for face, pkt in acks:
            face.send_packet(pkt)

    def close(self) -> None:
        """Nothing new is acked from now on; acks queued before still go out with the
        next flush_relays."""
        self.open = False
