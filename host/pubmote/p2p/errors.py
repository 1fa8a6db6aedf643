"""The mesh stack's error hierarchy (one base, one class per kind of fault), the link
faults a handshake or negotiation may raise, and their loggable reasons."""

from __future__ import annotations

import asyncio


class MeshError(Exception):
    """Base of every error the mesh stack raises."""


class ProtocolError(MeshError):
    """The remote broke a protocol rule (malformed frame, window violation, ...)."""


class HandshakeError(ProtocolError):
    """The security handshake failed: garbage, bad signature, wrong PeerId."""


class DialError(MeshError):
    """A dial failed (refused, timed out, backoff, handshake failure)."""


class StreamReset(MeshError):
    """The stream was reset (by the remote, or because its connection closed)."""


class NegotiationError(ProtocolError):
    """multistream-select found no common protocol."""


# What a failing handshake or negotiation may raise; each becomes a logged reason.
LINK_ERRORS = (ProtocolError, MeshError, asyncio.IncompleteReadError, ConnectionError, OSError,
               asyncio.TimeoutError)


def describe(e: BaseException) -> str:
    """A short, loggable reason for a failed link."""
    if isinstance(e, asyncio.IncompleteReadError):
        return "remote closed the connection (wanted %d bytes, got %d)" % (
            e.expected or 0, len(e.partial))
    text = str(e)
    return "%s: %s" % (e.__class__.__name__, text) if text else e.__class__.__name__
