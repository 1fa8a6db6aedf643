"""The address forms a user writes: HOST:PORT, tcp://HOST:PORT URLs and serial ports with
an optional baud rate. One parser for each, used by the bridge, its faces, the DHT and the
CLI's configuration checks, so the same text means the same thing everywhere."""

from __future__ import annotations

import ipaddress
import logging
import os
import stat

DEFAULT_HOST = "127.0.0.1"
DEFAULT_BAUD = 115200


class AddressError(ValueError):
    """A malformed address; str() says what is wrong and shows a good one."""


# what a board or gateway name may not hold: it becomes an NDN name component, a topic
# level (/pubmote/demo/<board>/...) and a part of directed addresses (/GATEWAY/BOARD)
_NAME_BAD = set("/|%*\\ \"'")


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a board or gateway (None if it can): 1 to 64 bytes of
    UTF-8, printable, none of / | % * \\ quotes or spaces."""
    if not name:
        return "empty"
    if len(name.encode()) > 64:
        return "longer than 64 bytes"
    bad = sorted({ch for ch in name if ch in _NAME_BAD or not ch.isprintable()})
    if bad:
        return "it holds %s; names become topic levels and addresses: letters, digits, " \
               "- _ . : are fine" % " ".join(repr(ch) for ch in bad)
    return None


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this host only (127.0.0.0/8, ::1,
    localhost); an unspecified address (0.0.0.0, ::, empty) is every interface."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, assume the network


def log_exposure(log: logging.Logger, what: str, where: str, host: str, trust: str) -> bool:
    """One line when a listener binds beyond loopback: what is exposed, where, and what it
    trusts (e.g. "boards must sign their registration with their key"). True if exposed."""
    if is_loopback(host):
        return False
    log.warning("%s on %s is reachable from other hosts: %s", what, where, trust)
    return True


def parse_hostport(spec: str) -> tuple[str, int]:
    """`HOST:PORT` ([v6]:PORT too; an empty host is 127.0.0.1) -> (host, port).

    Raises:
        AddressError: no numeric port, or one above 65535.
    """
    host, sep, port = spec.rpartition(":")
    if not sep or not port.isdigit():
        raise AddressError("expected HOST:PORT with a numeric port, e.g. 127.0.0.1:5700")
    if int(port) > 65535:
        raise AddressError("port %s is above 65535; use a port from 1 to 65535" % port)
    return host.strip("[]") or DEFAULT_HOST, int(port)


def parse_tcp_url(url: str) -> tuple[str, int]:
    """`tcp://HOST:PORT` -> (host, port); `*` as the host means every interface."""
    if not url.startswith("tcp://"):
        raise AddressError("expected tcp://HOST:PORT")
    host, port = parse_hostport(url[len("tcp://"):])
    return ("0.0.0.0" if host == "*" else host), port


def parse_serial(spec: str) -> tuple[str, int]:
    """`/dev/ttyUSB0:115200` -> (port, baud); the baud rate is optional. Lenient: for a
    configuration already checked by `check_serial`."""
    port, sep, baud = spec.rpartition(":")
    if sep and baud.isdigit():
        return port, int(baud)
    return spec, DEFAULT_BAUD


def check_serial(spec: str) -> tuple[str, int]:
    """`PORT[:BAUD]` -> (port, baud). The port, if it exists, must be a character device
    (a serial line); one that does not exist yet is waited for (a board not plugged in).

    Raises:
        AddressError: naming --serial, what is wrong and what to write instead.
    """
    port, baud = spec, DEFAULT_BAUD
    if not os.path.exists(spec):
        head, sep, tail = spec.rpartition(":")
        if sep and tail.isdigit():
            port, baud = head, int(tail)
        elif sep and head and (os.path.exists(head) or tail.isalnum()):
            # /dev/ttyUSB0:abc; device names with colons (/dev/serial/by-path/...-0:1.0)
            # end in something other than letters and digits only
            raise AddressError("--serial %s: baud rate %r is not a number (PORT[:BAUD], "
                               "e.g. %s:115200)" % (spec, tail, head))
    if os.path.exists(port):
        mode = os.stat(port).st_mode
        if not stat.S_ISCHR(mode):
            raise AddressError("--serial %s: not a serial port (a %s); boards appear as "
                               "/dev/ttyUSB*, /dev/ttyACM* or a simulated board's tty"
                               % (port, "directory" if stat.S_ISDIR(mode) else "regular file"))
        if os.path.realpath(port) in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                      "/dev/urandom"):
            raise AddressError("--serial %s: not a serial port (%s is a special file); boards "
                               "appear as /dev/ttyUSB*, /dev/ttyACM* or a simulated board's "
                               "tty" % (port, port))
    if not 50 <= baud <= 4_000_000:
        raise AddressError("--serial %s: baud rate %d out of range (e.g. 115200)" % (spec, baud))
    return port, baud
