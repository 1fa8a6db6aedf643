"""The bridge's resource limits: every bound a network peer can run into, as one settings
object read from the bridge's configuration (the keys and their defaults: docs/limits.md),
and the counter of how often each limit refused, closed or evicted something, by key (the
status line and the live view show it)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pubmote.limits")


class Limits:
    """The limit values; `Limits()` has the defaults, `Limits.from_config(cfg)` a bridge's.
    Each attribute is a config key of the same name (docs/limits.md says what it bounds)."""

    # connections, per listener and per source address (an IPv6 peer: its /64)
    sp_max_conns: int = 64
    sp_max_conns_per_ip: int = 32
    sp_handshake_timeout_s: float = 5.0
    sp_max_unconfirmed: int = 8192
    tcp_max_conns: int = 256
    tcp_max_conns_per_ip: int = 8
    udp_max_boards: int = 256
    udp_max_boards_per_ip: int = 8
    ndn_max_apps: int = 64
    ndn_max_apps_per_ip: int = 16
    board_register_timeout_s: float = 10.0
    board_idle_timeout_s: float = 60.0
    mesh_max_connections: int = 128
    mesh_max_pending_inbound: int = 32
    mesh_max_inbound_per_ip: int = 8
    mesh_handshake_timeout_s: float = 10.0
    # the hub's tables
    max_boards: int = 256
    max_topics: int = 1024
    fib_max: int = 1024
    fib_max_per_face: int = 32
    pit_max: int = 4096
    pit_max_per_face: int = 256
    pit_max_lifetime_ms: int = 10000
    pit_max_nonces: int = 8

    def __init__(self, **values: float) -> None:
        for key, value in values.items():
            if key not in KEYS:
                raise ValueError("no limit named %r" % key)
            setattr(self, key, type(getattr(Limits, key))(value))

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Limits:
        """The limits among a bridge configuration's keys (the others are ignored)."""
        return cls(**{k: cfg[k] for k in KEYS if cfg.get(k) is not None})

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in KEYS}


KEYS = tuple(k for k in Limits.__annotations__)
DEFAULTS: dict[str, float] = Limits().as_dict()


def check_value(key: str, value: Any) -> str | None:
    """What is wrong with `value` for limit `key` (None if nothing): whole numbers of 1 or
    more, durations above 0 seconds."""
    if isinstance(DEFAULTS[key], int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return "expected a whole number of 1 or more, got %r" % (value,)
    elif isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return "expected a number above 0, got %r" % (value,)
    return None


class LimitHits:
    """How often each limit was hit (a connection refused or closed, an entry evicted or
    refused), by its config key. A hit is logged the 1st, 2nd, 4th, 8th... time per key:
    a peer that runs into a limit for ever does not flood the log."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def hit(self, key: str, what: str = "", *args: object) -> None:
        """Count a hit of limit `key`; `what % args` says what it did (formatted only
        when logged)."""
        assert key in DEFAULTS, key  # every counter is a documented limit
        n = self.counts[key] = self.counts.get(key, 0) + 1
        if n & (n - 1) == 0:
            log.warning("limit %s hit: " + (what or "-") + " (%d so far; docs/limits.md)",
                        key, *args, n)

    def summary(self, extra: dict[str, int] | None = None) -> str:
        """`key n, key n` for the limits hit so far (and `extra` counts), or `none`."""
        counts = dict(self.counts)
        for k, n in (extra or {}).items():
            if n:
                counts[k] = counts.get(k, 0) + n
        return ", ".join("%s %d" % kv for kv in sorted(counts.items())) or "none"
