"""A small multiaddr codec: text <-> binary for the protocols a TCP mesh meets.

Full support for /ip4 /ip6 /tcp /udp /dns* /p2p; a few more codes are known by size so
that addresses a peer advertises (QUIC, WebSockets, circuits) decode instead of failing.
"""

from __future__ import annotations

import ipaddress

from pubmote.p2p.codec import b58decode, b58encode, decode_uvarint, encode_uvarint
from pubmote.p2p.errors import ProtocolError

# code -> (name, size in bits; -1 = varint length-prefixed)
_PROTOCOLS: dict[int, tuple[str, int]] = {
    4: ("ip4", 32),
    6: ("tcp", 16),
    273: ("udp", 16),
    33: ("dccp", 16),
    41: ("ip6", 128),
    42: ("ip6zone", -1),
    53: ("dns", -1),
    54: ("dns4", -1),
    55: ("dns6", -1),
    56: ("dnsaddr", -1),
    132: ("sctp", 16),
    290: ("p2p-circuit", 0),
    421: ("p2p", -1),
    400: ("unix", -1),
    443: ("https", 0),
    448: ("tls", 0),
    449: ("sni", -1),
    460: ("quic", 0),
    0x01CD: ("quic-v1", 0),
    0x01D1: ("webtransport", 0),
    0x01D2: ("certhash", -1),
    477: ("ws", 0),
    478: ("wss", 0),
    480: ("http", 0),
    0x0118: ("webrtc-direct", 0),
    0x0119: ("webrtc", 0),
}
_BY_NAME = {name: (code, size) for code, (name, size) in _PROTOCOLS.items()}
_BY_NAME["ipfs"] = _BY_NAME["p2p"]  # the old name of /p2p
_MAX_ADDR_BYTES = 1024


def _value_to_bytes(name: str, value: str) -> bytes:
    if name == "ip4":
        return ipaddress.IPv4Address(value).packed
    if name == "ip6":
        return ipaddress.IPv6Address(value).packed
    if name in ("tcp", "udp", "dccp", "sctp"):
        port = int(value)
        if not 0 <= port <= 65535:
            raise ValueError("port out of range: %s" % value)
        return port.to_bytes(2, "big")
    if name == "p2p":
        return b58decode(value)
    return value.encode()


def _value_to_text(name: str, raw: bytes) -> str:
    if name == "ip4":
        return str(ipaddress.IPv4Address(raw))
    if name == "ip6":
        return str(ipaddress.IPv6Address(raw))
    if name in ("tcp", "udp", "dccp", "sctp"):
        return str(int.from_bytes(raw, "big"))
    if name == "p2p":
        return b58encode(raw)
    if name == "certhash":
        return raw.hex()
    return raw.decode("utf-8", "replace")


class Multiaddr:
    """An immutable multiaddr: a list of (protocol name, value text) components."""

    __slots__ = ("parts",)

    def __init__(self, text_or_parts: str | list[tuple[str, str]]) -> None:
        if isinstance(text_or_parts, str):
            self.parts = self._parse_text(text_or_parts)
        else:
            self.parts = list(text_or_parts)

    @staticmethod
    def _parse_text(text: str) -> list[tuple[str, str]]:
        if not text.startswith("/"):
            raise ValueError("multiaddr must start with /: %r" % text)
        tokens = text.strip("/").split("/")
        parts: list[tuple[str, str]] = []
        i = 0
        while i < len(tokens):
            name = tokens[i]
            if name not in _BY_NAME:
                raise ValueError("unknown multiaddr protocol %r" % name)
            _code, size = _BY_NAME[name]
            if name == "ipfs":
                name = "p2p"
            if size == 0:
                parts.append((name, ""))
                i += 1
                continue
            if i + 1 >= len(tokens):
                raise ValueError("multiaddr protocol %s needs a value" % name)
            value = tokens[i + 1]
            if name == "unix":
                # a path runs to the end of the address
                value = "/" + "/".join(tokens[i + 1:])
                i = len(tokens)
            else:
                i += 2
            _value_to_bytes(name, value)  # validate now, not on first use
            parts.append((name, value))
        return parts

    @classmethod
    def from_bytes(cls, raw: bytes) -> Multiaddr:
        """Parse the binary form; ProtocolError when malformed or a code is unknown."""
        if len(raw) > _MAX_ADDR_BYTES:
            raise ProtocolError("multiaddr too long")
        parts: list[tuple[str, str]] = []
        pos = 0
        while pos < len(raw):
            code, pos = decode_uvarint(raw, pos)
            if code not in _PROTOCOLS:
                raise ProtocolError("unknown multiaddr code %d" % code)
            name, size = _PROTOCOLS[code]
            if size < 0:
                n, pos = decode_uvarint(raw, pos)
            else:
                n = size // 8
            if n > len(raw) - pos:
                raise ProtocolError("multiaddr component beyond input")
            value = raw[pos:pos + n]
            pos += n
            try:
                parts.append((name, _value_to_text(name, value)))
            except ValueError as e:
                raise ProtocolError("bad multiaddr %s value: %s" % (name, e)) from None
        return cls(parts)

    def to_bytes(self) -> bytes:
        out = bytearray()
        for name, value in self.parts:
            code, size = _BY_NAME[name]
            out += encode_uvarint(code)
            if size == 0:
                continue
            raw = _value_to_bytes(name, value)
            if size < 0:
                out += encode_uvarint(len(raw))
            out += raw
        return bytes(out)

    def value_for(self, name: str) -> str | None:
        """The value of the first component called `name`, or None."""
        for n, v in self.parts:
            if n == name:
                return v
        return None

    def peer_id_text(self) -> str | None:
        """The /p2p/ component (base58 PeerId), if any."""
        return self.value_for("p2p")

    def without_p2p(self) -> Multiaddr:
        return Multiaddr([(n, v) for n, v in self.parts if n != "p2p"])

    def with_p2p(self, peer_id_text: str) -> Multiaddr:
        return Multiaddr([*self.without_p2p().parts, ("p2p", peer_id_text)])

    def tcp_host_port(self) -> tuple[str, int]:
        """(host, port) of an /ip4|ip6|dns*/tcp address; ValueError for anything else."""
        if len(self.parts) < 2 or self.parts[1][0] != "tcp":
            raise ValueError("not a TCP multiaddr: %s" % self)
        name, host = self.parts[0]
        if name not in ("ip4", "ip6", "dns", "dns4", "dns6"):
            raise ValueError("not a TCP multiaddr: %s" % self)
        return host, int(self.parts[1][1])

    @classmethod
    def from_tcp(cls, host: str, port: int) -> Multiaddr:
        ip = ipaddress.ip_address(host)
        return cls([("ip4" if ip.version == 4 else "ip6", str(ip)), ("tcp", str(port))])

    def __str__(self) -> str:
        out = []
        for name, value in self.parts:
            out.append("/" + name)
            if value:
                out.append(value if name == "unix" else "/" + value)
        return "".join(out)

    def __repr__(self) -> str:
        return "Multiaddr(%s)" % self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Multiaddr) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash(tuple(self.parts))
