"""The envelope a gateway wraps around each message it sends into the gossip mesh, and the
per-origin tracker that finds duplicates and gaps among the envelopes that come back out.

An envelope is one canonical CBOR map (pubmote.core.cbor) with short text keys:

    v  1                        format version
    t  topic URI (text)         the board topic, e.g. /pubmote/demo/sim1/temperature
    p  payload (bytes)
    b  origin board (text)      the board's name, or "sp:HOST:PORT" / an NDN app's prefix
    g  origin gateway (text)    the gateway's name (its orch in directed addresses)
    ts origin timestamp (int)   ms since 1970 when the origin gateway relayed it
    e  epoch (int)              ms since 1970 when the origin gateway started: a restarted
                                gateway starts its sequence numbers again under a new epoch
    s  sequence number (int)    1, 2, 3 ... per origin gateway, epoch and gossip topic
    a  address (text)           directed messages only: /orch/node, /*, ...
    o  originator (text)        directed messages only: /orch/node or /orch of the sender
    tk taken-time (int)         optional: ms since 1970 when the board took the message, by
                                its clock (docs/protocols/event-time.md)

Decoding is strict: anything else (unknown keys, wrong types, oversize fields) is an
EnvelopeError with the reason, never an exception of another kind. The bytes, with an
example: docs/protocols/mesh.md.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from pubmote.core import cbor

VERSION = 1
MAX_TOPIC = 1024          # bytes of the topic URI
MAX_NAME = 256            # bytes of a board, gateway, address or originator string
MAX_PAYLOAD = 256 * 1024  # a board packet is ~1 kB; SP clients may send more, not unbounded
_U63 = (1 << 63) - 1

_REQUIRED = {"v": int, "t": str, "p": bytes, "b": str, "g": str, "ts": int, "e": int, "s": int}
_OPTIONAL = {"a": str, "o": str, "tk": int}


class EnvelopeError(ValueError):
    """A mesh message that is not a well-formed pubmote envelope (the reason says why)."""


class Envelope:
    """One relayed message as it travels between gateways."""

    __slots__ = ("topic", "payload", "board", "gateway", "ts_ms", "epoch", "seq", "address",
                 "originator", "taken_ms")

    def __init__(self, *, topic: str, payload: bytes, board: str, gateway: str, ts_ms: int,
                 epoch: int, seq: int, address: str | None = None,
                 originator: str | None = None, taken_ms: int | None = None) -> None:
        self.topic = topic
        self.payload = payload
        self.board = board
        self.gateway = gateway
        self.ts_ms = ts_ms
        self.epoch = epoch
        self.seq = seq
        self.address = address
        self.originator = originator
        self.taken_ms = taken_ms

    @property
    def directed(self) -> bool:
        return self.address is not None

    def __repr__(self) -> str:
        return "Envelope(%s from %s/%s e=%d s=%d%s, %d B)" % (
            self.topic, self.gateway, self.board, self.epoch, self.seq,
            " to %s by %s" % (self.address, self.originator) if self.directed else "",
            len(self.payload))

    def as_map(self) -> dict[str, Any]:
        m: dict[str, Any] = {"v": VERSION, "t": self.topic, "p": self.payload, "b": self.board,
                             "g": self.gateway, "ts": self.ts_ms, "e": self.epoch, "s": self.seq}
        if self.address is not None:
            m["a"] = self.address
            m["o"] = self.originator
        if self.taken_ms is not None:
            m["tk"] = self.taken_ms
        return m

    def encode(self) -> bytes:
        """The CBOR bytes; EnvelopeError if a field is out of bounds (checked as on decode)."""
        _check(self)
        try:
            return cbor.dumps(self.as_map())
        except cbor.CborError as e:
            raise EnvelopeError("cannot encode envelope: %s" % e) from None

    @classmethod
    def decode(cls, data: bytes) -> Envelope:
        """Parse and check one envelope; EnvelopeError says what is wrong."""
        if len(data) > MAX_PAYLOAD + 4 * MAX_NAME + MAX_TOPIC + 128:
            raise EnvelopeError("envelope of %d bytes is too large" % len(data))
        try:
            m = cbor.loads(data)
        except cbor.CborError as e:
            raise EnvelopeError(str(e)) from None
        if not isinstance(m, dict):
            raise EnvelopeError("envelope is a %s, not a map" % type(m).__name__)
        for k in m:
            if k not in _REQUIRED and k not in _OPTIONAL:
                raise EnvelopeError("unknown key %r" % (k,))
        for k in _REQUIRED:
            if k not in m:
                raise EnvelopeError("missing key %r" % k)
        for k, typ in (*_REQUIRED.items(), *_OPTIONAL.items()):
            if k in m and (type(m[k]) is not typ):  # bool is not an int here
                raise EnvelopeError("key %r is a %s, not %s" % (k, type(m[k]).__name__,
                                                               typ.__name__))
        if m["v"] != VERSION:
            raise EnvelopeError("envelope version %d, this gateway speaks %d" % (m["v"], VERSION))
        if ("a" in m) != ("o" in m):
            raise EnvelopeError("a directed envelope needs both address and originator")
        env = cls(topic=m["t"], payload=m["p"], board=m["b"], gateway=m["g"], ts_ms=m["ts"],
                  epoch=m["e"], seq=m["s"], address=m.get("a"), originator=m.get("o"),
                  taken_ms=m.get("tk"))
        _check(env)
        return env


def _check(env: Envelope) -> None:
    if not env.topic.startswith("/") or len(env.topic.encode()) > MAX_TOPIC:
        raise EnvelopeError("topic must be a URI starting with / of at most %d bytes" % MAX_TOPIC)
    if len(env.payload) > MAX_PAYLOAD:
        raise EnvelopeError("payload of %d bytes exceeds %d" % (len(env.payload), MAX_PAYLOAD))
    for what, s in (("board", env.board), ("gateway", env.gateway),
                    ("address", env.address or ""), ("originator", env.originator or "")):
        if len(s.encode()) > MAX_NAME:
            raise EnvelopeError("%s longer than %d bytes" % (what, MAX_NAME))
    if not env.gateway:
        raise EnvelopeError("empty origin gateway")
    if not 1 <= env.seq <= _U63:
        raise EnvelopeError("sequence number %d out of range" % env.seq)
    if (not 0 <= env.epoch <= _U63 or not 0 <= env.ts_ms <= _U63
            or not 0 <= (env.taken_ms or 0) <= _U63):
        raise EnvelopeError("epoch or timestamp out of range")


# ---- duplicates and gaps per origin ----------------------------------------------------

NEW = "new"              # first time seen, in order or after a gap
LATE = "late"            # first time seen, but after a newer one: it fills a counted gap
DUPLICATE = "duplicate"  # seen before: not delivered again
STALE = "stale"          # too far behind the window (or an older epoch) to tell: dropped


class _Origin:
    __slots__ = ("epoch", "first", "high", "seen", "received", "gaps", "late", "duplicates",
                 "stale")

    def __init__(self, epoch: int, seq: int) -> None:
        self.epoch = epoch
        self.first = seq  # below it nothing was counted missing (we joined late)
        self.high = seq
        self.seen = 1  # bit i set: seq (high - i) has been seen
        self.received = 1
        self.gaps = 0
        self.late = 0
        self.duplicates = 0
        self.stale = 0


class GapTracker:
    """Per-origin sequence tracking: every envelope is NEW, LATE, DUPLICATE or STALE.

    Deliver NEW and LATE, drop the others. A jump forward by k counts k-1 gaps (missing
    messages); a LATE arrival fills one of them. `lost` = gaps - late: messages that never
    came. An origin's first message starts its tracking without counting a gap (we may have
    joined after it started). Bounded: at most `max_origins` origins (least recently heard
    evicted, counted), each with a window of `window` sequence numbers.
    """

    def __init__(self, *, window: int = 4096, max_origins: int = 1024) -> None:
        self.window = window
        self.mask = (1 << window) - 1
        self.max_origins = max_origins
        self._origins: OrderedDict[Hashable, _Origin] = OrderedDict()
        self.counters = {"received": 0, "duplicates": 0, "gaps": 0, "late": 0, "stale": 0,
                         "restarts": 0, "evicted": 0}

    def observe(self, origin: Hashable, epoch: int, seq: int) -> str:
        c = self.counters
        st = self._origins.get(origin)
        if st is None:
            if len(self._origins) >= self.max_origins:
                self._origins.popitem(last=False)
                c["evicted"] += 1
            self._origins[origin] = _Origin(epoch, seq)
            c["received"] += 1
            return NEW
        self._origins.move_to_end(origin)
        if epoch != st.epoch:
            if epoch < st.epoch:
                st.stale += 1
                c["stale"] += 1
                return STALE
            # the origin restarted: a new sequence begins; what the old one lacked stays counted
            c["restarts"] += 1
            st.epoch, st.first, st.high, st.seen = epoch, seq, seq, 1
            st.received += 1
            c["received"] += 1
            return NEW
        if seq > st.high:
            shift = seq - st.high
            st.gaps += shift - 1
            c["gaps"] += shift - 1
            st.seen = ((st.seen << shift) | 1) & self.mask if shift < self.window else 1
            st.high = seq
            st.received += 1
            c["received"] += 1
            return NEW
        back = st.high - seq
        if back >= self.window:
            st.stale += 1
            c["stale"] += 1
            return STALE
        bit = 1 << back
        if st.seen & bit:
            st.duplicates += 1
            c["duplicates"] += 1
            return DUPLICATE
        st.seen |= bit
        st.received += 1
        c["received"] += 1
        if seq < st.first:  # older than where tracking began: never counted as a gap
            return NEW
        st.late += 1
        c["late"] += 1
        return LATE

    @property
    def lost(self) -> int:
        """Messages skipped by some origin and not (yet) arrived late."""
        return self.counters["gaps"] - self.counters["late"]

    def origins(self) -> dict[str, dict[str, int]]:
        """Per-origin figures (for stats and logs), keyed by str(origin)."""
        return {str(k): {"epoch": v.epoch, "high": v.high, "received": v.received,
                         "gaps": v.gaps, "late": v.late, "duplicates": v.duplicates,
                         "stale": v.stale}
                for k, v in self._origins.items()}

    def __len__(self) -> int:
        return len(self._origins)
