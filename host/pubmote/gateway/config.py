"""The bridge's configuration: every key in one table (its default, its kind, what it is
for), and load_config, which merges the defaults, a TOML file and the command line. A key
and its `pubmote bridge` flag share one name (--journal-max-age is journal_max_age);
ALIASES are the other names a TOML file may use. Light on imports: `pubmote bridge --help`
lists the keys from here."""

from __future__ import annotations

import copy
import difflib
import tomllib
from typing import Any

from pubmote.core import limits
from pubmote.files import paths

# key -> (default, kind, what it is). The kind is what cli/config_check.py accepts (its
# checks are in cli/kinds.py): a name there, or ("int", low[, high]), ("choice", a, b...).
# A list default makes a list key: the kind applies to each entry, one text is one entry.
KEYS: dict[str, tuple[Any, Any, str]] = {
    # name before gateway: load_config copies name over gateway, so it is checked first
    "name": (None, "name", "this gateway's name in the mesh and in addresses (= gateway)"),
    "gateway": ("gw", "name", "this gateway's name; its NDN prefix is /pubmote/gw/NAME"),
    "serial": ([], "serial", "boards on serial ports, PORT[:BAUD]"),
    "udp": ([], "hostport", "UDP faces for WiFi boards, HOST:PORT"),
    "tcp": ([], "hostport", "TCP faces for WiFi boards, HOST:PORT"),
    # TLS on the tcp face (docs/security.md, Board links); encryption required: None = yes
    # when a certificate is given (then plaintext TCP boards and every UDP face are refused)
    "tcp_tls_cert": (None, "cert_in", "the tcp face's TLS certificate (PEM)"),
    "tcp_tls_key": (None, "tls_key_in", "its private key (PEM, mode 0600)"),
    "board_links_require_encryption": (None, "bool", "refuse unencrypted board links"),
    "sp_pub": ([], "sp_url", "SP PUB endpoints to bind (none: no default one)"),
    "sp_sub": ([], "sp_url", "SP SUB endpoints to bind (none: no default one)"),
    # SP and NDN apps have no authentication: bound beyond loopback, these listeners need
    # both their lists (core/allowlist.py); on loopback the lists, when given, still apply
    "sp_sub_allow_from": ([], "source_net", "addresses/networks that may connect to SP SUB"),
    "sp_sub_allow_topics": ([], "ndn_name", "topic prefixes SP SUB publishers may publish "
                            "into"),
    "sp_buffer_bytes": (1 << 20, ("int", 1), "bytes queued per SP subscriber"),
    "ndn_face": ([], "ndn_url", "NFD-compatible faces for NDN apps"),
    "ndn_allow_from": ([], "source_net", "addresses/networks that may connect to the NDN "
                       "face"),
    "ndn_allow_prefixes": ([], "ndn_name", "name prefixes NDN apps may publish and register "
                           "under"),
    "trace": (None, "trace_out", "a file every packet is recorded in (JSON lines)"),
    "keys": (None, "board_keys_in", "the boards' keys (JSON, `pubmote deploy --key-file`)"),
    # boards without a key (in `keys` or the simulated boards') may register by name;
    # refused by default, as mosquitto 2's allow_anonymous
    "allow_anonymous_boards": (False, "bool", "let boards without a key register by name"),
    "require_signed": ([], "ndn_name", "topic prefixes that take only signed messages"),
    "timeout_ms": (2000, ("int", 1), "how long a board's answer may take"),
    "board_queue_len": (64, ("int", 1), "messages queued per board"),
    # sleeping boards' sessions (core/sleepers.py, docs/protocols/sleep.md)
    "sleep_queue_max": (64, ("int", 1, 65536), "messages held for a sleeping board"),
    "sleep_queue_bytes": (16384, ("int", 1, 1 << 26), "bytes held for a sleeping board"),
    "session_expiry_s": (3600.0, "seconds", "a sleeping board overdue this long is "
                         "forgotten with its queue"),
    "journal": (None, "folder_out", "the folder the journal of relayed messages goes to"),
    "journal_max_bytes": (8 << 20, ("int", 1), "journal files rotate at this size"),
    "journal_max_age": (60.0, "seconds", "journal files rotate after this many seconds"),
    "journal_fsync": ("rotate", ("choice", "none", "rotate", "always"),
                      "when journal files are synced to disk"),
    # records held in memory while the journal cannot write (core/journal.py); beyond,
    # the oldest are dropped and counted in records_lost
    "journal_backlog_records": (65536, ("int", 1), "records held while the journal cannot "
                                "write"),
    "journal_backlog_bytes": (16 << 20, ("int", 1), "bytes held while the journal cannot "
                              "write"),
    "sim_boards": (0, ("int", 0, 64), "simulated boards to start"),
    "sim_kind": ("unix", ("choice", "unix", "pico"), "what the simulated boards are"),
    "sim_dir": (None, "folder_out", "where simulated boards' ptys, configs and logs go"),
    "sim_period_ms": (1000, ("int", 10, 86_400_000), "the demo boards' publishing period"),
    "sim_app": ("demo", "module", "the app simulated boards run"),
    "sim_app_dir": (None, "folder_in", "a folder added to the simulated boards' path"),
    "sim_app_config": ({}, "board_config", "extra keys for every simulated board's config"),
    "sim_keys": (True, "bool", "give each simulated board a key (kept in the sim dir)"),
    # retained topics on the BitTorrent DHT (BEP 44 items, BEP 50 overlays): retained.py
    "retained": ([], "ndn_name", "topics kept on the DHT: exact, or prefixes ending in /"),
    "dht_key_file": (None, "dht_key", "the ed25519 key retained items are signed with"),
    "dht_pubkey": (None, "pubkey", "the publisher's key of retained topics followed"),
    "dht_host": ("127.0.0.1", "host", "the address the DHT node binds"),
    "dht_port": (0, "port", "the DHT node's UDP port (0: any)"),
    "dht_bootstrap": ([], "hostport", "DHT nodes to join through, HOST:PORT"),
    "dht_timeout_s": (2.0, "seconds", "per-query DHT timeout"),
    # the gateway mesh (GossipSub over libp2p) and directed addressing: gateway/mesh/relay.py
    "mesh_listen": ([], "multiaddr", "mesh listen addresses, /ip4/0.0.0.0/tcp/4001"),
    "mesh_peer": ([], "peer_multiaddr", "gateways to stay connected to"),
    "mesh_key_file": (None, "mesh_key", "the libp2p identity (default ~/.config/pubmote/"
                      "mesh.key)"),
    "realm": ("pubmote", "realm", "gossip topics are /REALM/..."),
    "realm_member": ([], "peer_or_key", "PeerIds (or key files) that may publish"),
    "mesh_topic": (["*"], "topic_root", "board-topic roots with a gossip topic of their own"),
    "mesh_out_queue": (8192, ("int", 1), "envelopes waiting for the mesh router"),
    "status_every": (None, "seconds", "--no-view's status line period (default 60; 10 "
                     "with -v)"),
    # resource limits: connection caps per listener and per source address, handshake and
    # idle timeouts, the hub's tables (core/limits.py; their table: docs/limits.md)
    **{k: (v, "seconds" if isinstance(v, float) else ("int", 1),
           "a resource limit (docs/limits.md)")
       for k, v in limits.DEFAULTS.items()},
}
DEFAULTS: dict[str, Any] = {k: row[0] for k, row in KEYS.items()}

# other names the TOML file (and a library caller) may give a key
ALIASES = {"journal_max_age_s": "journal_max_age", "mesh_topics": "mesh_topic"}

# what `pubmote bridge` binds when neither flags nor the config name SP endpoints
# (`--sp-pub none` binds none); load_config for a library user or a test binds nothing
SP_DEFAULTS = {"sp_pub": "tcp://127.0.0.1:5560", "sp_sub": "tcp://127.0.0.1:5561"}


def suggest(key: str) -> str:
    """' (did you mean KEY?)' for the closest known key, or ''."""
    near = difflib.get_close_matches(key, list(KEYS) + list(ALIASES), n=1, cutoff=0.6)
    return " (did you mean %s?)" % near[0] if near else ""


def _canonical(data: dict[str, Any], where: str) -> dict[str, Any]:
    """data with aliases under their key; ValueError for unknown keys and for a key
    given twice (under both names)."""
    out: dict[str, Any] = {}
    unknown = []
    for k, v in data.items():
        key = ALIASES.get(k, k)
        if key not in KEYS:
            unknown.append(k + suggest(k))
            continue
        if key in out:
            raise ValueError("%s: %s and %s are one key; give one of them"
                             % (where, key, next(a for a, b in ALIASES.items() if b == key)))
        out[key] = v
    if unknown:
        raise ValueError("%s: unknown key%s %s; `pubmote bridge --help` lists the keys"
                         % (where, "s" if len(unknown) > 1 else "", ", ".join(unknown)))
    return out


def read_toml(path: str) -> dict[str, Any]:
    """The bridge's keys in a TOML file (top level, or its [bridge] table); ValueError,
    naming --config and the file, for a file that cannot be read or is not TOML."""
    why = paths.readable_file(path, text=True)
    if why is not None:
        raise ValueError("--config %s: %s" % (path, why))
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError("--config %s: not UTF-8 text (byte 0x%02x at offset %d)"
                         % (path, raw[e.start], e.start)) from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError("--config %s: not valid TOML (%s)" % (path, e)) from None
    table = data.get("bridge", data)
    if not isinstance(table, dict):
        raise ValueError("--config %s: bridge must be a table ([bridge])" % path)
    return _canonical(table, "--config %s" % path)


def load_config(path: str | None, overrides: dict[str, Any],
                sp_defaults: bool = False) -> dict[str, Any]:
    """Defaults, then the TOML file (top-level keys or a [bridge] table), then flags
    (overrides: None or [] leave a key as it is). With sp_defaults (the command line),
    SP_DEFAULTS where neither gives sp_pub/sp_sub. ValueError for a file that cannot be
    read, is not TOML or names unknown keys (the values are checked by config_check)."""
    cfg = copy.deepcopy(DEFAULTS)
    data = read_toml(path) if path else {}
    cfg.update(data)
    for k, v in _canonical(overrides, "the configuration").items():
        if v is None or v == []:
            continue
        cfg[k] = v
    if sp_defaults:
        for k, url in SP_DEFAULTS.items():
            if k not in data and not overrides.get(k):
                cfg[k] = [url]
    for k, row in KEYS.items():
        if isinstance(row[0], list) and isinstance(cfg[k], str):
            cfg[k] = [cfg[k]]
    for k in ("sp_pub", "sp_sub"):
        if isinstance(cfg[k], list):  # `none` turns an endpoint (or its default) off
            cfg[k] = [u for u in cfg[k] if not (isinstance(u, str) and u.lower() == "none")]
    if cfg["name"]:
        cfg["gateway"] = cfg["name"]  # `name` (the mesh's word) and `gateway` are one thing
    return cfg

