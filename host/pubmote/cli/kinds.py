"""The kinds of value `pubmote`'s options and the bridge's config keys take, each a check:
the value (text from the command line, or what the TOML file holds) -> the value to use,
or ValueError whose message says what is wrong in a few words (the caller names the
option and shows the value). argparse runs them through `arg(check)`, config_check on every
key, so a flag and its TOML key are refused alike and before anything starts."""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], Any]


class KindError(ValueError):
    """A value that is not of its option's kind; str() is the reason alone."""


def show(value: Any) -> str:
    """A value as a one-line error shows it: as typed, quoted when it would not read as
    one word (empty, spaces, control characters)."""
    text = value if isinstance(value, str) else repr(value)
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        return repr(text)
    return text


def nonempty(value: Any) -> str:
    if not isinstance(value, str):
        raise KindError("expected text, got %r" % (value,))
    if not value:
        raise KindError("empty")
    return value


# numbers -----------------------------------------------------------------------------

def whole(low: int, high: int | None = None, what: str = "") -> Check:
    """A whole number from low (to high)."""
    span = "%d to %d" % (low, high) if high is not None else "at least %d" % low

    def check(value: Any) -> int:
        if isinstance(value, str):
            v = value.strip()
            if not re.fullmatch(r"[-+]?\d+", v):
                raise KindError("not a whole number; give %s%s" % (span, what))
            n = int(v)
        elif isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            raise KindError("expected a whole number, got %r" % (value,))
        if n < low or (high is not None and n > high):
            raise KindError("out of range: give %s%s" % (span, what))
        return n
    return check


def seconds(*, zero_ok: bool = False) -> Check:
    """A finite number of seconds above 0 (or from 0)."""
    span = "0 or more seconds" if zero_ok else "a number of seconds above 0"

    def check(value: Any) -> float:
        if isinstance(value, str):
            try:
                f = float(value)
            except ValueError:
                raise KindError("not a number; give %s" % span) from None
        elif isinstance(value, int | float) and not isinstance(value, bool):
            f = float(value)
        else:
            raise KindError("expected a number of seconds, got %r" % (value,))
        if not math.isfinite(f) or f < 0 or (f == 0 and not zero_ok):
            raise KindError("give %s" % span)
        return f
    return check


def choice(*options: str) -> Check:
    def check(value: Any) -> str:
        if value not in options:
            raise KindError("one of %s" % ", ".join(options))
        return str(value)
    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise KindError("expected true or false")
    return value


# names and text with a form ----------------------------------------------------------

def text(value: Any) -> str:
    return nonempty(value)


def name(value: Any) -> str:
    """A board or gateway name: it becomes a topic level and an address."""
    from pubmote.core.addresses import name_problem

    if not isinstance(value, str):
        raise KindError("expected text, got %r" % (value,))
    why = name_problem(value)
    if why is not None:
        raise KindError("not a name: %s" % why)
    return value


def realm(value: Any) -> str:
    from pubmote.gateway.mesh.realm import check_realm

    try:
        return check_realm(nonempty(value))
    except KindError:
        raise
    except ValueError as e:
        raise KindError(str(e)) from None


def topic_root(value: Any) -> str:
    from pubmote.gateway.mesh.realm import check_roots

    try:
        check_roots([nonempty(value)])
    except KindError:
        raise
    except ValueError as e:
        raise KindError(str(e)) from None
    return str(value)


def ndn_name(value: Any) -> str:
    """An NDN name URI such as /pubmote/demo/sim1/command."""
    from pubmote_wire import name as ndn
    from pubmote_wire.errors import DecodeError

    v = nonempty(value)
    if not v.startswith("/"):
        raise KindError("not an NDN name: it does not start with /; e.g. /pubmote/demo")
    try:
        ndn.from_uri(v)
    except (DecodeError, ValueError) as e:
        raise KindError("not an NDN name URI (%s); e.g. /pubmote/demo" % e) from None
    return v


_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def module(value: Any) -> str:
    v = nonempty(value)
    if not _MODULE.match(v):
        raise KindError("not a module name; e.g. demo or myapp.main")
    return v


def pubkey(value: Any) -> str:
    v = nonempty(value)
    try:
        raw = bytes.fromhex(v)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise KindError("expected 64 hex digits (a 32-byte ed25519 public key)")
    return v


def salt(value: Any) -> str:
    if not isinstance(value, str):
        raise KindError("expected text")
    if len(value.encode()) > 64:
        raise KindError("%d bytes: a salt is at most 64 bytes (BEP 44)" % len(value.encode()))
    return value


_UNITS = ("microsecond", "millisecond", "second", "minute", "hour", "day", "week")
_INTERVAL = re.compile(r"^\s*(\d+(\.\d+)?\s*(%s)s?\s*)+$" % "|".join(_UNITS), re.IGNORECASE)


def duration(value: Any) -> str:
    """A Spark interval: a number and a unit, e.g. '1 minute'."""
    if not isinstance(value, str) or not _INTERVAL.match(value):
        raise KindError("not a duration; write a number and a unit, e.g. '1 minute', "
                        "'30 seconds', '2 hours'")
    return value


def key_value(value: Any) -> tuple[str, str]:
    """KEY=VALUE with a KEY."""
    key, sep, v = nonempty(value).partition("=")
    if not sep or not key.strip():
        raise KindError("expected KEY=VALUE, e.g. spark.executor.memory=4g")
    return key.strip(), v


def board_setting(value: Any) -> tuple[str, Any]:
    """A `deploy --set` entry: KEY=VALUE (a JSON value, else text) that the board's config
    schema accepts."""
    from pubmote.boards.schema import check_value

    key, sep, raw = nonempty(value).partition("=")
    if not sep or not key:
        raise KindError("expected KEY=VALUE, e.g. period_ms=200")
    try:
        v: Any = json.loads(raw)
    except json.JSONDecodeError:
        v = raw
    try:
        check_value(key, v, "")
    except ValueError as e:
        raise KindError(str(e).strip()) from None
    return key, v


def json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        v = json.loads(nonempty(value))
    except json.JSONDecodeError as e:
        raise KindError("not JSON (%s); e.g. '{\"period_ms\": 200}'" % e.msg) from None
    if not isinstance(v, dict):
        raise KindError("expected a JSON object, e.g. '{\"period_ms\": 200}'")
    return v


def board_config(value: Any) -> dict[str, Any]:
    """Extra keys for simulated boards' configs: a JSON object the schema accepts."""
    from pubmote.boards.schema import check_values

    v = json_object(value)
    try:
        check_values(v, "")
    except ValueError as e:
        raise KindError(str(e).strip()) from None
    return v


def hex_bytes(value: Any) -> str:
    """Bytes as hex digits, whitespace allowed between them."""
    v = nonempty(value)
    digits = "".join(v.split())
    if len(digits) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", digits):
        raise KindError("not hex bytes (pairs of 0-9 a-f); e.g. 0a0b0c")
    return v


def packet_hex(value: Any) -> str:
    """A packet as hex, or - for hex on stdin."""
    return "-" if value == "-" else hex_bytes(value)


_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def dns_name(value: Any) -> str:
    """A DNS name or an IP address."""
    v = nonempty(value)
    try:
        ipaddress.ip_address(v)
        return v
    except ValueError:
        pass
    labels = v.rstrip(".").split(".")
    if len(v) > 253 or not all(_LABEL.match(x) for x in labels) or labels[-1].isdigit():
        raise KindError("not a DNS name or IP address")
    return v


def board(value: Any) -> str:
    """A board type with a profile (boards/*.toml): what `deploy` copies pubmote to."""
    from pubmote.boards.profiles import profile_names

    v = nonempty(value)
    if v not in profile_names():
        raise KindError("not a board type; one of %s" % ", ".join(profile_names()))
    return v


def flash_board(value: Any) -> str:
    """A board `flash` can put firmware on: a profile with a flash tool, or pico / pico_w
    (an RP2040 with the firmware `pubmote firmware build` made)."""
    from pubmote.boards.profiles import load_profile, profile_names

    names = [n for n in profile_names() if load_profile(n)["flash"]["tool"] != "none"]
    names += ["pico", "pico_w"]
    if value not in names:
        raise KindError("not a board to flash; one of %s" % ", ".join(names))
    return str(value)


def chip(value: Any) -> str:
    from pubmote.boards.flash import OFFSETS

    if value not in OFFSETS:
        raise KindError("not an ESP32 variant; one of %s" % ", ".join(OFFSETS))
    return str(value)


# network addresses -------------------------------------------------------------------

def port(value: Any) -> int:
    n: int = whole(0, 65535, " (0: any free port)")(value)
    return n


def host(value: Any) -> str:
    """An address to bind: an IP address or a DNS name."""
    v = nonempty(value)
    try:
        return dns_name(v.strip("[]"))
    except KindError:
        raise KindError("not an IP address or host name") from None


def hostport(value: Any) -> str:
    from pubmote.core.addresses import AddressError, parse_hostport

    v = nonempty(value)
    try:
        parse_hostport(v)
    except AddressError as e:
        raise KindError(str(e)) from None
    return v


def connect_url(value: Any) -> str:
    """A Spark Connect server: sc://HOST:PORT (the port defaults to 15002)."""
    from urllib.parse import urlsplit

    v = nonempty(value)
    parts = urlsplit(v)
    try:
        port = parts.port
    except ValueError:
        raise KindError("bad port; e.g. sc://127.0.0.1:15002") from None
    if parts.scheme != "sc" or not parts.hostname or port == 0:
        raise KindError("not a Spark Connect URL; e.g. sc://127.0.0.1:15002")
    return v


def source_net(value: Any) -> str:
    """A source address or network allowed to connect: 10.0.0.7, 192.168.1.0/24, fd00::/8."""
    from pubmote.core.allowlist import network

    v = nonempty(value)
    try:
        network(v)
    except ValueError:
        raise KindError("not an IP address or network; e.g. 192.168.1.20 or "
                        "192.168.1.0/24") from None
    return v


def _socket_path(url: str, scheme: str, bind: bool) -> None:
    path = url[len(scheme):]
    if not path:
        raise KindError("expected %s/PATH" % scheme)
    if bind:
        from pubmote.faces import unixpath

        try:
            unixpath.check(path)
        except unixpath.SocketPathError as e:
            raise KindError(str(e).replace(path + ": ", "", 1).replace(path + " ", "", 1)) \
                from None
    elif os.path.lexists(path):
        import stat

        if not stat.S_ISSOCK(os.stat(path).st_mode):
            raise KindError("%s is not a socket (an SP endpoint's ipc:// path is one)" % path)


def _url(value: Any, schemes: tuple[str, ...], bind: bool, example: str) -> str:
    v = nonempty(value)
    if v.startswith("tcp://"):
        hostport(v[len("tcp://"):])
        return v
    for scheme in schemes:
        if v.startswith(scheme):
            _socket_path(v, scheme, bind)
            return v
    raise KindError("expected %s" % example)


def sp_url(value: Any) -> str:
    """An SP endpoint to bind: tcp://HOST:PORT, ipc:///PATH, or none."""
    if isinstance(value, str) and value.lower() == "none":
        return value
    return _url(value, ("ipc://",), True,
                "tcp://HOST:PORT or ipc:///PATH (or none to bind nothing)")


def ndn_url(value: Any) -> str:
    """An NDN face to listen on, as NFD's: tcp://HOST:PORT or unix:///PATH."""
    return _url(value, ("unix://",), True,
                "tcp://HOST:PORT or unix:///PATH, e.g. tcp://127.0.0.1:6363 (NDN apps "
                "connect as to NFD)")


def client_url(value: Any) -> str:
    """An SP endpoint to connect to: tcp://HOST:PORT or ipc:///PATH."""
    return _url(value, ("ipc://",), False, "tcp://HOST:PORT or ipc:///PATH")


def serial(value: Any) -> str:
    """PORT[:BAUD]: a port that, if it exists, is a serial line."""
    from pubmote.core.addresses import AddressError, check_serial

    v = nonempty(value)
    try:
        check_serial(v)
    except AddressError as e:
        raise KindError(str(e).split(": ", 1)[-1]) from None
    return v


def serial_port(value: Any) -> str:
    """A board's serial port, which may not be plugged in yet."""
    v = nonempty(value)
    if os.path.exists(v):
        serial(v)
    return v


def multiaddr(value: Any) -> str:
    """A TCP multiaddr to listen on, e.g. /ip4/0.0.0.0/tcp/4001."""
    v = nonempty(value)
    _tcp_multiaddr(v, "/ip4/0.0.0.0/tcp/4001")
    return v


def _tcp_multiaddr(v: str, example: str) -> Any:
    from pubmote.p2p.multiaddr import Multiaddr

    try:
        ma = Multiaddr(v)
    except ValueError as e:
        raise KindError("not a multiaddr (%s); expected %s" % (e, example)) from None
    try:
        ma.tcp_host_port()
    except ValueError:
        raise KindError("not a TCP address (pubmote's mesh speaks TCP); expected %s"
                        % example) from None
    return ma


def peer_multiaddr(value: Any) -> str:
    """A peer to dial: /ip4/HOST/tcp/PORT/p2p/PEERID."""
    from pubmote.p2p.identity import PeerId

    example = "/ip4/HOST/tcp/PORT/p2p/PEERID (the peer's `pubmote mesh id`)"
    v = nonempty(value)
    ma = _tcp_multiaddr(v, example)
    pid = ma.peer_id_text()
    if not pid:
        raise KindError("no /p2p/PEERID at the end; expected %s" % example)
    try:
        PeerId.from_base58(pid)
    except ValueError as e:
        why = str(e).replace("not a PeerId: ", "").replace("not a PeerId ", "")
        raise KindError("%s is not a PeerId (%s); expected %s" % (pid, why, example)) from None
    return v


def peer_or_key(value: Any) -> str:
    """A realm member: a PeerId, or the key file of one."""
    from pubmote.gateway.mesh.realm import load_members

    v = nonempty(value)
    try:
        load_members([v])
    except ValueError as e:
        raise KindError(str(e)) from None
    return v


def arg(fn: Check) -> Check:
    """An argparse `type` that runs the check fn; main.Parser turns its KindError into one
    line naming the option and showing the value."""

    def convert(value: str) -> Any:
        return fn(value)
    convert.kind_check = True  # type: ignore[attr-defined]
    convert.__name__ = getattr(fn, "__name__", "value")
    return convert


def flag_name(action: argparse.Action) -> str:
    """How a one-line error names an option: its long flag, or a positional's metavar."""
    if action.option_strings:
        longs = [o for o in action.option_strings if o.startswith("--")]
        return (longs or action.option_strings)[0]
    return str(action.metavar or action.dest)
