"""Board profiles (boards/*.toml): link, pins, heap budget, how to flash and deploy."""

from __future__ import annotations

import tomllib
from typing import Any

from pubmote.boards.files import profiles_dir

BOARDS_DIR = profiles_dir()
REQUIRED = ("name", "description", "mpy_arch", "heap_budget_bytes", "default_link", "links",
            "flash", "deploy")


def profile_names() -> list[str]:
    return sorted(p.stem for p in BOARDS_DIR.glob("*.toml"))


def load_profile(name: str) -> dict[str, Any]:
    """The profile of board type `name`; ValueError names the known ones if it is unknown."""
    path = BOARDS_DIR / (name + ".toml")
    if not path.is_file():
        raise ValueError("unknown board %r; known boards: %s" % (name, ", ".join(profile_names())))
    with open(path, "rb") as f:
        prof = tomllib.load(f)
    missing = [k for k in REQUIRED if k not in prof]
    if missing:
        raise ValueError("board profile %s lacks %s" % (path, ", ".join(missing)))
    if prof["default_link"] not in prof["links"]:
        raise ValueError("board profile %s: default_link %r is not among its links"
                         % (path, prof["default_link"]))
    return prof


def board_config(profile: dict[str, Any], name: str, link: str | None = None,
                 **overrides: Any) -> dict[str, Any]:
    """The firmware's config (pubmote_config.json) for a board of this profile."""
    link = link or profile["default_link"]
    if link not in profile["links"]:
        raise ValueError("board %s has no %r link (it has: %s)"
                         % (profile["name"], link, ", ".join(profile["links"])))
    cfg: dict[str, Any] = {"name": name, "link": link}
    cfg.update(profile["links"][link])
    cfg.update(overrides)
    return cfg


def check_config(profile: dict[str, Any], cfg: dict[str, Any]) -> None:
    """ValueError (one line naming the key and the --set that fixes it) for a board config
    the firmware could not run with: a value of the wrong type or range (boards/schema.py),
    a WiFi link without the gateway's address, or on a real board without the network to
    join."""
    from pubmote.boards.schema import check_values

    check_values(cfg)
    link = cfg["link"]
    _check_tls(cfg)
    if link not in ("tcp", "udp"):
        return
    host = cfg.get("host")
    if not isinstance(host, str) or not host or host in ("0.0.0.0", "::"):
        raise ValueError("the %s link needs the bridge's address: --set host=GATEWAY_IP (the "
                         "machine running `pubmote bridge --%s 0.0.0.0:%s`)"
                         % (link, link, cfg.get("port", 6365)))
    port = cfg.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
        raise ValueError("port %r: the bridge's --%s port, 1 to 65535: --set port=%d"
                         % (port, link, 6365 if link == "tcp" else 6364))
    if profile["name"] == "unix":
        return  # the simulated board uses the host's network
    ssid = cfg.get("ssid")
    if not isinstance(ssid, str) or not 0 < len(ssid.encode()) <= 32:
        raise ValueError("the %s link on %s joins WiFi: --set ssid=NETWORK (1 to 32 bytes) "
                         "--set password=PASSWORD" % (link, profile["name"]))
    pw = cfg.get("password")
    if pw is not None and (not isinstance(pw, str) or not (pw == "" or 8 <= len(pw) <= 63)):
        raise ValueError("password: a WPA2 password has 8 to 63 characters (leave it out for "
                         "an open network): --set password=PASSWORD")


def _check_tls(cfg: dict[str, Any]) -> None:
    """TLS settings the firmware's tcp link can use: on a tcp link only, with exactly one
    way to verify the gateway (its certificate in DER hex, or its SHA-256 in hex)."""
    if not cfg.get("tls"):
        for key in ("tls_ca", "tls_fingerprint"):
            if cfg.get(key):
                raise ValueError("%s is set but tls is off: --set tls=1 (or leave %s out)"
                                 % (key, key))
        return
    if cfg["link"] != "tcp":
        raise ValueError("tls: only the tcp link is encrypted (udp has no DTLS with the "
                         "bridge; serial links are wired): use --link tcp")
    ca, pin = cfg.get("tls_ca"), cfg.get("tls_fingerprint")
    if bool(ca) == bool(pin):
        raise ValueError("tls: give the gateway's certificate or its fingerprint, one of the "
                         "two: --gateway-cert FILE (from `pubmote tls init`), or --set "
                         "tls_fingerprint=SHA256 (`pubmote tls show CERT`)")
    for key, value in (("tls_ca", ca), ("tls_fingerprint", pin)):
        if not value:
            continue
        try:
            raw = bytes.fromhex(value) if isinstance(value, str) else b""
        except ValueError:
            raw = b""
        if not raw or (key == "tls_fingerprint" and len(raw) != 32):
            raise ValueError("%s: expected %s in hex" % (
                key, "a SHA-256 (64 digits)" if key == "tls_fingerprint"
                else "the certificate's DER"))
