"""Check a bridge configuration (flags and TOML merged) before anything starts, so every
mistake a user can make in it is one line naming the flag or key, what is wrong, and what
to write instead: wrong types, ports out of range, malformed addresses and URLs, serial
ports that are not serial ports, board keys that are not hex."""

from __future__ import annotations

from typing import Any

from pubmote.core import limits
from pubmote.core.addresses import AddressError, check_serial, parse_hostport


class ConfigError(ValueError):
    """A configuration mistake; str() is the one line to show the user."""


# config keys whose flag is not --KEY-WITH-DASHES, and keys that only the TOML file sets
_FLAG_NAMES = {"journal_max_age_s": "--journal-max-age", "mesh_topics": "--mesh-topic"}
_TOML_ONLY = ("timeout_ms", "board_queue_len", "sp_buffer_bytes", "retained", "dht_key_file",
              "dht_pubkey", "dht_host", "dht_port", "dht_bootstrap", "dht_timeout_s",
              "mesh_out_queue", "journal_backlog_records", "journal_backlog_bytes",
              *limits.KEYS)


def _flag(key: str) -> str:
    return _FLAG_NAMES.get(key) or "--" + key.replace("_", "-")


def _where(key: str) -> str:
    if key in _TOML_ONLY:
        return "TOML key %s" % key
    return "%s (TOML key %s)" % (_flag(key), key)


# key -> (expected type(s), what to write): lists of strings are checked item by item
_LISTS = ("serial", "udp", "tcp", "sp_pub", "sp_sub", "ndn_face", "require_signed",
          "mesh_listen", "mesh_peer", "realm_member", "mesh_topics", "retained",
          "dht_bootstrap")
_INTS = ("sim_boards", "sim_period_ms", "journal_max_bytes", "timeout_ms", "board_queue_len",
         "sp_buffer_bytes", "dht_port", "mesh_out_queue", "journal_backlog_records",
         "journal_backlog_bytes")
_FLOATS = ("journal_max_age_s", "dht_timeout_s")
_STRS = ("gateway", "trace", "keys", "journal", "journal_fsync", "sim_dir", "sim_app",
         "sim_app_dir", "name", "mesh_key_file", "realm", "dht_key_file", "dht_pubkey",
         "dht_host", "sim_kind", "tcp_tls_cert", "tcp_tls_key")
_BOOLS = ("board_links_require_encryption", "allow_anonymous_boards")


def check(cfg: dict[str, Any]) -> None:
    """Raise ConfigError for the first mistake in cfg (a load_config result)."""
    for key in _LISTS:
        v = cfg.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError("%s: expected text or a list of texts, got %r" % (_where(key), v))
    for key in _INTS:
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ConfigError("%s: expected a whole number, got %r" % (_where(key), v))
    for key in _FLOATS:
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ConfigError("%s: expected a number of seconds, got %r" % (_where(key), v))
    for key in _STRS:
        v = cfg.get(key)
        if v is not None and not isinstance(v, str):
            raise ConfigError("%s: expected text, got %r" % (_where(key), v))
    for key in _BOOLS:
        v = cfg.get(key)
        if v is not None and not isinstance(v, bool):
            raise ConfigError("%s: expected true or false, got %r" % (_where(key), v))
    for key in limits.KEYS:  # docs/limits.md
        v = cfg.get(key)
        why = limits.check_value(key, v) if v is not None else None
        if why is not None:
            raise ConfigError("%s: %s (docs/limits.md)" % (_where(key), why))
    if not isinstance(cfg.get("sim_app_config", {}), dict):
        raise ConfigError("%s: expected a JSON object such as '{\"period_ms\": 200}', got %r"
                          % (_where("sim_app_config"), cfg["sim_app_config"]))
    from pubmote.boards.schema import check_values

    try:
        check_values(cfg.get("sim_app_config") or {}, _where("sim_app_config"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    from pubmote.boards.fleet import SIM_KINDS

    if cfg.get("sim_kind", "unix") not in SIM_KINDS:
        raise ConfigError("%s: one of %s, not %r"
                          % (_where("sim_kind"), ", ".join(SIM_KINDS), cfg["sim_kind"]))
    if not 0 <= cfg.get("sim_boards", 0) <= 64:
        raise ConfigError("%s: 0 to 64 simulated boards, not %d"
                          % (_where("sim_boards"), cfg["sim_boards"]))
    for key in ("udp", "tcp"):
        for spec in cfg[key]:
            host_port(spec, _flag(key))
    for key in ("sp_pub", "sp_sub", "ndn_face"):
        for url in cfg[key]:
            _url(url, _flag(key))
    for spec in cfg["serial"]:
        serial_port(spec)
    if cfg.get("keys"):
        _keys(cfg["keys"])
    for key in ("journal_backlog_records", "journal_backlog_bytes"):
        if cfg.get(key) is not None and cfg[key] < 1:
            raise ConfigError("%s: at least 1, not %d (records the journal holds in memory "
                              "while it cannot write)" % (_where(key), cfg[key]))
    _board_link_tls(cfg)
    if cfg.get("dht_port") is not None and not 0 <= cfg["dht_port"] <= 65535:
        raise ConfigError("%s: port %d is not 0..65535" % (_where("dht_port"), cfg["dht_port"]))
    for addr in cfg.get("mesh_listen", []):
        _multiaddr(addr, "--mesh-listen", peer=False)
    for addr in cfg.get("mesh_peer", []):
        _multiaddr(addr, "--mesh-peer", peer=True)
    _mesh_names(cfg)


def _mesh_names(cfg: dict[str, Any]) -> None:
    """Names the mesh and directed addressing use: the gateway's, the realm's, its members,
    the gossip topic roots (the same checks the mesh makes when it starts)."""
    from pubmote.gateway.mesh.directed import check_name
    from pubmote.gateway.mesh.realm import check_realm, check_roots, load_members

    name_key = "name" if cfg.get("name") else "gateway"
    steps: list[tuple[str, Any]] = [
        (name_key, lambda: check_name(str(cfg.get("gateway") or "gw"), "gateway")),
        ("realm", lambda: check_realm(str(cfg.get("realm") or "pubmote"))),
        ("realm_member", lambda: load_members(cfg.get("realm_member", []))),
        ("mesh_topics", lambda: check_roots(cfg.get("mesh_topics", []) or ["*"])),
    ]
    for key, step in steps:
        try:
            step()
        except ValueError as e:
            raise ConfigError("%s: %s" % (_where(key), e)) from None


def _multiaddr(text: str, flag: str, peer: bool) -> None:
    from pubmote.p2p.identity import PeerId
    from pubmote.p2p.multiaddr import Multiaddr

    example = ("/ip4/HOST/tcp/PORT/p2p/PEERID (the peer's `pubmote mesh id`)" if peer
               else "/ip4/0.0.0.0/tcp/4001")
    try:
        ma = Multiaddr(text)
    except ValueError as e:
        raise ConfigError("%s %s: not a multiaddr (%s); expected %s" % (flag, text, e, example)) \
            from None
    if not peer:
        return
    pid = ma.peer_id_text()
    if not pid:
        raise ConfigError("%s %s: no /p2p/PEERID at the end; expected %s" % (flag, text, example))
    try:
        PeerId.from_base58(pid)
    except ValueError as e:
        raise ConfigError("%s %s: %s is not a PeerId (%s); expected %s"
                          % (flag, text, pid, _why(e), example)) \
            from None


def host_port(spec: str, flag: str, shown: str | None = None) -> tuple[str, int]:
    """`HOST:PORT` with a port 0..65535 ([v6]:PORT too)."""
    try:
        return parse_hostport(spec)
    except AddressError as e:
        raise ConfigError("%s %s: %s" % (flag, shown or spec, e)) from None


def _url(url: str, flag: str) -> None:
    for scheme in ("ipc://", "unix://"):
        if url.startswith(scheme):
            if not url[len(scheme):]:
                raise ConfigError("%s %s: expected %s/PATH" % (flag, url, scheme))
            from pubmote.faces import unixpath

            try:
                unixpath.check(url[len(scheme):])
            except unixpath.SocketPathError as e:
                raise ConfigError("%s %s" % (flag, e)) from None
            return
    if not url.startswith("tcp://"):
        raise ConfigError("%s %s: expected tcp://HOST:PORT or ipc:///PATH%s" % (
            flag, url, " (or none to bind nothing)" if flag.startswith("--sp") else ""))
    host_port(url[len("tcp://"):], flag, url)


def serial_port(spec: str) -> tuple[str, int]:
    """`PORT[:BAUD]`: the port, if it exists, must be a serial line (core.addresses)."""
    try:
        return check_serial(spec)
    except AddressError as e:
        raise ConfigError(str(e)) from None


def _keys(path: str) -> None:
    from pubmote.core.auth import KeysFileError, load_keys

    try:
        load_keys(path)
    except OSError as e:
        raise ConfigError("--keys %s: %s" % (path, e.strerror or e)) from None
    except KeysFileError as e:
        raise ConfigError("--keys %s: %s" % (path, e.why)) from None
    except ValueError as e:  # a key file others may read: the message names it
        raise ConfigError("--keys: %s" % e) from None


def _board_link_tls(cfg: dict[str, Any]) -> None:
    """The --tcp face's certificate and key (readable, a pair, the key private), and
    whether the board faces can be as encrypted as the configuration requires."""
    from pubmote.core.tlscert import check_key_file, load_cert
    from pubmote.gateway.bridge import board_links_encrypted

    try:
        board_links_encrypted(cfg)
        if cfg.get("tcp_tls_cert"):
            load_cert(cfg["tcp_tls_cert"])
            check_key_file(cfg["tcp_tls_key"])
    except ValueError as e:  # CertError too
        raise ConfigError(str(e)) from None


def _why(e: ValueError) -> str:
    """A PeerId parse error without its own 'not a PeerId' (the line says that already)."""
    return str(e).replace("not a PeerId: ", "").replace("not a PeerId ", "")
