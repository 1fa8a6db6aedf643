"""Which subscribers take a message: every board's and NDN app's nanomsg-style prefix
filters in one index, so a relayed message costs a few dict look-ups instead of one
filter match per subscriber: with many boards, matching each message against every
board's filters would be a large share of the bridge's CPU per message
(bench/gateway/hotpath.py measures it).

A filter matches a line if it is a byte prefix of it (nanomsg; the empty filter matches
everything). The index groups the filters by length: for each distinct length L, the
subscribers whose filter is exactly `line[:L]`. The hub rebuilds it when any filter or
subscriber changes (`Relay.publish` compares a generation count)."""

from __future__ import annotations

from collections.abc import Iterable

from pubmote.core.registry import BoardState


class FilterIndex:
    """Subscribers by their filters; `match(line)` is what `SubFilter.matches` of each
    would say, in the order the subscribers were given."""

    def __init__(self, receivers: Iterable[BoardState]) -> None:
        by_len: dict[int, dict[bytes, list[tuple[int, BoardState]]]] = {}
        for rank, b in enumerate(receivers):
            for p in b.filter.prefixes():
                by_len.setdefault(len(p), {}).setdefault(p, []).append((rank, b))
        # shortest first: the empty filter (everything) and short topic prefixes
        self._tables = sorted(by_len.items())

    def match(self, line: bytes) -> list[BoardState]:
        """The subscribers whose filters take `line`, each once."""
        if not self._tables:
            return []  # nobody subscribes to anything (a gateway of publishers)
        hits: list[tuple[int, BoardState]] = []
        n = len(line)
        for length, table in self._tables:
            if length > n:
                break
            got = table.get(line[:length])
            if got is not None:
                hits.extend(got)
        if len(hits) > 1:
            # a subscriber with two matching filters is found twice: keep one, in order
            hits = sorted({rank: (rank, b) for rank, b in hits}.values(), key=_rank)
        return [b for _, b in hits]


def _rank(hit: tuple[int, BoardState]) -> int:
    return hit[0]
