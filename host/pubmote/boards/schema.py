"""The board config's keys (pubmote_config.json, what the firmware reads): their types and
ranges, checked before a config reaches a board (`pubmote deploy --set`, the simulated
boards' --sim-app-config), so a value the firmware would die on at boot is one line on the
host instead. Keys the firmware does not read are the app's own and pass unchecked."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pubmote.core.addresses import name_problem

# key -> (kind, low, high, what it is): kind int (low..high), bool, flag (a bool or 0/1),
# str (low..high bytes),
# hex (low..high bytes once decoded), uri (an NDN name URI), module (a Python module path)
KEYS: dict[str, tuple[str, int, int, str]] = {
    "period_ms": ("int", 1, 86_400_000, "the demo's reading period"),
    "timeout_ms": ("int", 50, 60_000, "how long the board waits for the bridge's answer"),
    "retries": ("int", 0, 20, "attempts per publish"),
    "keepalive_ms": ("int", 200, 3_600_000, "re-registration period"),
    "queue_len": ("int", 1, 256, "messages queued per subscription"),
    "max_soft": ("int", 1, 256, "unacked messages held"),
    "max_soft_bytes": ("int", 64, 1 << 20, "bytes of unacked messages held"),
    "outbox_len": ("int", 1, 4096, "messages the outbox holds (publish wait=False)"),
    "outbox_bytes": ("int", 64, 1 << 20, "bytes of topics and payloads the outbox holds"),
    "outbox_dir": ("str", 1, 128, "the durable outbox's directory on the board's filesystem"),
    "outbox_log_bytes": ("int", 512, 1 << 30, "with outbox_dir: messages past the outbox's "
                         "RAM bounds wait on flash only, the log held to this many bytes"),
    "flash_dir": ("str", 1, 128, "where updates over the link are staged (default: the root)"),
    "inline": ("bool", 0, 0, "small messages inline in their notify"),
    "batch": ("bool", 0, 0, "link batches on a serial line"),
    "baud": ("int", 300, 4_000_000, "the UART's baud rate"),
    "uart": ("int", 0, 7, "the UART's number"),
    "tx": ("int", 0, 63, "the UART's TX pin"),
    "rx": ("int", 0, 63, "the UART's RX pin"),
    "host": ("str", 1, 253, "the bridge's address"),
    "port": ("int", 1, 65535, "the bridge's port"),
    "ssid": ("str", 1, 32, "the WiFi network"),
    "password": ("str", 0, 63, "the WiFi password"),
    "wifi_timeout_ms": ("int", 1000, 600_000, "how long joining WiFi may take"),
    "wifi_backoff_max_ms": ("int", 100, 3_600_000, "the longest wait between WiFi joins"),
    "prefix": ("uri", 1, 256, "the board's NDN prefix"),
    "path": ("str", 1, 4096, "the simulated board's pty"),
    "key": ("hex", 16, 64, "the board's HMAC key"),
    "app": ("module", 1, 128, "the app module the board runs"),
    "tls": ("flag", 0, 0, "TLS on the tcp link"),
    "tls_ca": ("hex", 1, 8192, "the gateway's certificate (DER) the board trusts"),
    "tls_fingerprint": ("hex", 32, 32, "the gateway certificate's SHA-256"),
    "tls_name": ("str", 1, 253, "the name the gateway's certificate must carry"),
    "tls_timeout_ms": ("int", 1000, 600_000, "how long the TLS handshake may take"),
}
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_value(key: str, value: Any, where: str = "--set") -> None:
    """ValueError (one line: where, the key, what was wrong, an example) when value is not
    what the firmware expects for key; keys it does not read pass."""
    if key == "name":
        if not isinstance(value, str) or name_problem(value) is not None:
            raise ValueError("%s name=%r: not a board name: %s" % (
                where, value, name_problem(value) if isinstance(value, str) else "not text"))
        return
    spec = KEYS.get(key)
    if spec is None:
        return
    kind, low, high, what = spec
    if kind in _NOT_TEXT:
        bad = _NOT_TEXT[kind](value, low, high)
    elif not isinstance(value, str):
        bad = "expected text"
    else:
        bad = _TEXT[kind](value, low, high)
    if bad is not None:
        raise ValueError("%s %s=%r (%s): %s" % (where, key, value, what, bad))


# One check per kind of value: what is wrong with it (for the message), or None.


def _int_problem(value: Any, low: int, high: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return "expected a whole number from %d to %d" % (low, high)
    if not low <= value <= high:
        return "out of range %d to %d" % (low, high)
    return None


def _bool_problem(value: Any, low: int, high: int) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def _flag_problem(value: Any, low: int, high: int) -> str | None:
    if value not in (True, False, 0, 1) or isinstance(value, float):
        return "expected 1 or 0 (true or false)"
    return None


def _str_problem(value: str, low: int, high: int) -> str | None:
    if not low <= len(value.encode()) <= high:
        return "expected %d to %d bytes of text" % (low, high)
    return None


def _hex_problem(value: str, low: int, high: int) -> str | None:
    try:
        n = len(bytes.fromhex(value))
    except ValueError:
        n = -1
    if low <= n <= high:
        return None
    if low == high:
        return "expected %d bytes as hex (%d digits)" % (low, 2 * low)
    return "expected %d to %d bytes as hex" % (low, high)


def _uri_problem(value: str, low: int, high: int) -> str | None:
    if value.startswith("/") and len(value.encode()) <= high:
        return None
    return "expected an NDN name URI such as /pubmote/node/board1"


def _module_problem(value: str, low: int, high: int) -> str | None:
    if _MODULE.match(value):
        return None
    return "expected a module name such as demo or myapp.main"


_NOT_TEXT: dict[str, Callable[[Any, int, int], str | None]] = {
    "int": _int_problem, "bool": _bool_problem, "flag": _flag_problem}
_TEXT: dict[str, Callable[[str, int, int], str | None]] = {
    "str": _str_problem, "hex": _hex_problem, "uri": _uri_problem, "module": _module_problem}


def check_values(cfg: dict[str, Any], where: str = "--set") -> None:
    """check_value for every key of cfg."""
    for k, v in cfg.items():
        check_value(k, v, where)
