"""Allow-lists for the listeners that have no authentication of their own (the SP SUB
endpoint, the NDN face): the source addresses that may connect, and the NDN name prefixes
their peers may publish (or register) under. Bound beyond loopback, such a listener must
be given both, or it is not started (docs/security.md)."""

from __future__ import annotations

import ipaddress
import logging

from pubmote.core import addresses
from pubmote_wire import name as ndn_name

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network(text: str) -> Network:
    """`192.168.1.0/24`, `10.0.0.7` or `fd00::/8` -> the network (a lone address is /32 or
    /128). Raises ValueError with what is wrong."""
    return ipaddress.ip_network(text.strip().strip("[]"), strict=False)


def exposed_problem(what: str, url: str, host: str, sources: list[str], prefixes: list[str],
                    keys: tuple[str, str], names: str) -> str | None:
    """Why a listener bound at host may not start (None if it may): beyond loopback it
    needs both lists. One line naming the endpoint and the keys (and flags) to set."""
    if addresses.is_loopback(host) or (sources and prefixes):
        return None
    return ("%s %s is reachable from other hosts and has no authentication of its own: set "
            "%s (--%s: the addresses or networks that may connect, e.g. 192.168.1.0/24) and "
            "%s (--%s: the %s), or bind it to 127.0.0.1"
            % (what, url, keys[0], keys[0].replace("_", "-"), keys[1],
               keys[1].replace("_", "-"), names))


class AllowList:
    """The source networks and name prefixes one listener admits; an empty list admits
    everything (a loopback bind given no list). Refusals are counted here."""

    def __init__(self, sources: list[str] | None = None,
                 prefixes: list[str] | None = None) -> None:
        self.nets = [network(s) for s in sources or []]
        self.prefixes = [ndn_name.from_uri(p) for p in prefixes or []]
        self.refused_source = 0
        self.refused_name = 0

    def source_ok(self, peer: object) -> bool:
        """Whether a peer (asyncio's peername) may connect; a unix socket peer (no address)
        is on this host and always may."""
        if not self.nets or not isinstance(peer, tuple) or not peer:
            return True
        try:
            ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
        except ValueError:
            return True  # not an IP peer: a local socket
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in n for n in self.nets):
            return True
        self.refused_source += 1
        return False

    def name_ok(self, name: bytes) -> bool:
        """Whether an NDN name (TLV components) is under an allowed prefix; counted if not."""
        if not self.prefixes or any(ndn_name.is_prefix(p, name) for p in self.prefixes):
            return True
        self.refused_name += 1
        return False

    def say(self, log: logging.Logger, n: int, fmt: str, *args: object) -> None:
        """Log a refusal: the first, then every 1000th (a peer cannot flood the log)."""
        if n == 1 or n % 1000 == 0:
            log.warning(fmt + " (%d so far)", *args, n)
