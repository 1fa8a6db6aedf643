"""What an SP subscriber's socket has really taken. A message handed to a subscriber is
only queued: it waits in the transport's buffer, then in the kernel's send queue until
the peer's TCP acknowledges it (on Linux: SIOCOUTQ counts the bytes not yet acknowledged;
for a unix socket, not yet read). A message is sent once every byte of it has left both;
what is still in them when the connection is lost never reached the subscriber.

Per message this costs one append (its end offset in the byte stream); the offsets are
compared with what has left in one step per check, not per message."""

from __future__ import annotations

import array
import fcntl
import socket
import termios
from collections import deque
from typing import Any

_OUTQ = getattr(termios, "TIOCOUTQ", None)  # == SIOCOUTQ on Linux


class SentLog:
    """The messages queued for one socket and not yet known to have left the host, each
    with the offset in the stream just past its last byte. The relay queues a message of
    n bytes by advancing `queued_end` by n and appending (queued_end, item) to `entries`
    (inline: it is the hot path); the item comes back from take_sent once it is sent."""

    __slots__ = ("written", "queued_end", "entries", "last_buffered", "_fd", "_outq")

    def __init__(self, sock: socket.socket | None, already_written: int) -> None:
        self.written = already_written  # bytes handed to the transport so far
        self.queued_end = already_written  # and those queued for it (written at flush)
        self.entries: deque[tuple[int, Any]] = deque()
        self.last_buffered = 0  # the transport's buffer at our last look (only shrinks)
        self._fd = sock.fileno() if sock is not None and _OUTQ is not None else -1
        self._outq = array.array("i", [0])

    def wrote(self, nbytes: int, buffered: int) -> None:
        """nbytes handed to the transport, whose buffer then held `buffered` bytes."""
        self.written += nbytes
        self.last_buffered = buffered

    def unacked(self) -> int:
        """Bytes in the kernel's send queue not yet acknowledged by the peer (0 where the
        kernel does not say)."""
        if self._fd < 0:
            return 0
        try:
            fcntl.ioctl(self._fd, _OUTQ, self._outq, True)  # type: ignore[arg-type]
        except OSError:
            return 0
        return max(0, self._outq[0])

    def sent_end(self, buffered: int | None) -> int:
        """The stream offset up to which every byte has left the host. `buffered`: the
        transport's buffer now, or None when it is gone (a connection lost: what its
        buffer held at our last look counts as never sent)."""
        if buffered is None:
            buffered = self.last_buffered
        else:
            self.last_buffered = buffered
        return self.written - buffered - self.unacked()

    def take_sent(self, end: int) -> deque[tuple[int, Any]]:
        """Remove and return the (offset, item) of the messages wholly before `end`."""
        entries = self.entries
        if not entries or entries[-1][0] <= end:  # all of them: the usual case
            self.entries = deque()
            return entries
        out: deque[tuple[int, Any]] = deque()
        while entries[0][0] <= end:
            out.append(entries.popleft())
        return out

    def take_all(self) -> deque[tuple[int, Any]]:
        out, self.entries = self.entries, deque()
        return out
