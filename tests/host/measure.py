"""What an attack or fault scenario measures around a running bridge (the adversarial
tests assert it, `make harden-report` prints it): the bridge's resident memory before the
attack, at its peak and after, against the bound its limits imply (docs/limits.md's
figures at the scenario's settings); how long a genuine board took to be served again
once the attacker left; and how many messages a board saw acked never reached a
subscriber."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pubmote.procs import status_kb

KIB = 1024
MIB = 1024 * KIB
RECOVERY_S = 10.0  # a genuine board is served again within this of the attacker leaving
# What the measurement moves beside anything a peer makes the bridge hold: when the
# bridge runs in the test's process, the attackers and the test's clients share it;
# Python keeps freed memory in its arenas; the first use of a code path (a log line, a
# rendered view, a thread's stack) costs once. A scenario without an attack (a bridge and
# a board relaying, its SP clients connecting and leaving) stays well inside it.
FLOOR = 16 * MIB

# docs/limits.md, "memory it implies", per entry
SP_KERNEL_SEND = 512 * KIB     # the kernel's send buffer (256 KiB, doubled by Linux)
SP_UNCONFIRMED = 96            # per message queued for a PUB subscriber
SP_SUB_READING = 64 * KIB      # an SP message being read
BOARD_CONN = 65 * KIB          # a board link's out buffer and the frame being read
UDP_BOARD = 5 * KIB
NDN_APP = MIB + 8800           # an NDN app's out buffer and the packet being read
MESH_CONN = 256 * KIB          # a libp2p connection's read buffer (or a Yamux window)
BOARD_MESSAGE = KIB            # a message in a board's queue: at most one link frame
TOPIC = 2355                   # ~2.3 KiB: a topic and its last value, up to 1 KiB each
ROUTE = 205                    # ~0.2 KiB
PIT_ENTRY = 1126               # ~1.1 KiB, measured
JOURNAL_RECORD = 100           # a backlog record's own objects, beside its bytes


def reset_peak(pid: int | str = "self") -> None:
    """Start the process's VmHWM (peak resident memory) again from its current size."""
    try:
        Path("/proc/%s/clear_refs" % pid).write_text("5")
    except OSError:
        pass  # an older kernel: the peak then counts from the process's start


class Bound:
    """The memory a scenario's peers can make the bridge hold, by its limits: each part
    from docs/limits.md's per-entry figures at the bridge's settings `cfg`, plus FLOOR."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.parts: list[tuple[str, int]] = [("floor %s" % _size(FLOOR), FLOOR)]

    def _add(self, what: str, n: int, each: int) -> Bound:
        self.parts.append(("%s %d x %s" % (what, n, _size(each)), n * each))
        return self

    def _listeners(self, key: str) -> int:
        return max(1, len(self.cfg.get(key) or []))

    def sp_pub(self, conns: int | None = None) -> Bound:
        c = self.cfg
        n = conns if conns is not None else c["sp_max_conns"] * self._listeners("sp_pub")
        each = c["sp_buffer_bytes"] + SP_KERNEL_SEND + c["sp_max_unconfirmed"] * SP_UNCONFIRMED
        return self._add("SP subscribers", n, each)

    def sp_sub(self, conns: int | None = None) -> Bound:
        n = conns if conns is not None else self.cfg["sp_max_conns"] * self._listeners("sp_sub")
        return self._add("SP publishers", n, SP_SUB_READING)

    def tcp(self) -> Bound:
        return self._add("board TCP conns", self.cfg["tcp_max_conns"] * self._listeners("tcp"),
                         BOARD_CONN)

    def udp(self) -> Bound:
        return self._add("UDP boards", self.cfg["udp_max_boards"] * self._listeners("udp"),
                         UDP_BOARD)

    def ndn(self) -> Bound:
        return self._add("NDN apps", self.cfg["ndn_max_apps"] * self._listeners("ndn_face"),
                         NDN_APP)

    def mesh(self) -> Bound:
        c = self.cfg
        return self._add("mesh conns", c["mesh_max_connections"] + c["mesh_max_pending_inbound"],
                         MESH_CONN)

    def boards(self) -> Bound:
        c = self.cfg
        return self._add("boards", c["max_boards"],
                         c["board_queue_len"] * BOARD_MESSAGE + BOARD_MESSAGE)

    def topics(self) -> Bound:
        return self._add("topics", self.cfg["max_topics"], TOPIC)

    def fib(self) -> Bound:
        return self._add("routes", self.cfg["fib_max"], ROUTE)

    def pit(self) -> Bound:
        return self._add("PIT entries", 2 * self.cfg["pit_max"], PIT_ENTRY)  # two pools

    def journal(self) -> Bound:
        c = self.cfg
        n = c["journal_backlog_records"]
        self.parts.append(("journal backlog %s + %d x %d B" % (
            _size(c["journal_backlog_bytes"]), n, JOURNAL_RECORD),
            c["journal_backlog_bytes"] + n * JOURNAL_RECORD))
        return self

    @property
    def kb(self) -> int:
        return sum(b for _, b in self.parts) // KIB

    def describe(self) -> str:
        return " + ".join(what for what, _ in self.parts)


def _size(n: int) -> str:
    if n >= MIB:
        return "%.1f MiB" % (n / MIB)
    if n >= KIB:
        return "%.1f KiB" % (n / KIB)
    return "%d B" % n


class Measure:
    """One scenario's figures. The memory is this process's (the bridge runs in it, with
    the test's clients and attackers) until watch() names the bridge's own process."""

    def __init__(self) -> None:
        self.pid: int | str = "self"
        self.rss_of = "this process (bridge in-process)"
        self.rss: dict[str, int] = {}
        self.bound: Bound | None = None
        self.recovery_s: float | None = None
        self.acked: int | None = None
        self.lost: list[int] | None = None

    def watch(self, pid: int) -> None:
        """Measure the bridge's process `pid` from now on (a restarted bridge: the new one;
        the peak keeps the old one's)."""
        self.pid = pid
        self.rss_of = "the bridge's process"

    def before(self) -> None:
        """The attack starts: the peak is counted from here."""
        reset_peak(self.pid)
        now = status_kb("VmRSS", self.pid)
        if now is not None:
            self.rss.update(before=now, peak=now, after=now)

    def sample(self) -> None:
        """Fold the process's peak since before() into `peak` and its size now into `after`
        (nothing, once the process is gone)."""
        peak, now = status_kb("VmHWM", self.pid), status_kb("VmRSS", self.pid)
        if peak is not None:
            self.rss["peak"] = max(self.rss.get("peak", 0), peak)
        if now is not None:
            self.rss["after"] = now

    def recovered(self, seconds: float) -> None:
        """A genuine board was served again `seconds` after the attacker left (the longest
        of a scenario's recoveries counts)."""
        self.recovery_s = max(seconds, self.recovery_s or 0.0)

    def acked_figures(self, acked: int, lost: list[int]) -> None:
        self.acked = (self.acked or 0) + acked
        self.lost = (self.lost or []) + list(lost)

    def figures(self, **details: Any) -> dict[str, Any]:
        """The standard figures, and the scenario's own."""
        out: dict[str, Any] = {
            "acked": self.acked, "acked_lost": None if self.lost is None else len(self.lost),
            "lost_examples": (self.lost or [])[:10], "rss_of": self.rss_of,
            "rss_before_kb": self.rss.get("before"), "rss_peak_kb": self.rss.get("peak"),
            "rss_after_kb": self.rss.get("after"), "recovery_s":
                None if self.recovery_s is None else round(self.recovery_s, 2)}
        if self.bound is not None and "before" in self.rss:
            out.update(bound_kb=self.bound.kb, bound=self.bound.describe(),
                       within_bound=self.rss["peak"] - self.rss["before"] <= self.bound.kb)
        out.update(details)
        return out
