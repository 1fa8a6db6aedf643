"""The mesh stack's error hierarchy: one base, one class per kind of fault."""

from __future__ import annotations


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
