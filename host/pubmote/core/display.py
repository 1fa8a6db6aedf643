"""Peer-supplied text made safe to put on a terminal or in a log line."""

from __future__ import annotations


def printable(text: str) -> str:
    """text with every character that is not printable (ESC, newlines, other controls)
    escaped as \\xNN or \\uNNNN: a peer's string cannot move the cursor, retitle the
    terminal or forge a line of output."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else
                   ("\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u%04x" % ord(c))
                   for c in text)
