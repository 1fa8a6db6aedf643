"""The kinds of the bridge's config keys by the names its table (gateway/config.py)
gives them, for config_check and for the bridge's flags, which take their key's kind."""

from __future__ import annotations

from typing import Any

from pubmote.cli import file_kinds as f
from pubmote.cli import kinds as k
from pubmote.cli.kinds import Check

NAMED: dict[str, Check] = {
    "text": k.text, "name": k.name, "realm": k.realm, "topic_root": k.topic_root,
    "ndn_name": k.ndn_name, "module": k.module, "pubkey": k.pubkey, "bool": k.boolean,
    "board_config": k.board_config, "port": k.port, "host": k.host, "hostport": k.hostport,
    "sp_url": k.sp_url, "source_net": k.source_net, "ndn_url": k.ndn_url, "serial": k.serial, "multiaddr": k.multiaddr,
    "peer_multiaddr": k.peer_multiaddr, "peer_or_key": k.peer_or_key, "file_in": f.file_in,
    "text_in": f.text_in, "trace_out": f.trace_out, "folder_in": f.folder_in,
    "folder_out": f.folder_out, "cert_in": f.cert_in, "tls_key_in": f.tls_key_in,
    "mesh_key": f.mesh_key, "dht_key": f.dht_key, "board_keys_in": f.board_keys_in,
    "seconds": k.seconds(),
}


def resolve(kind: str | tuple[Any, ...]) -> Check:
    """The check for a kind as the config table writes it: a name in NAMED, or
    ("int", low[, high]), ("choice", option, ...)."""
    if isinstance(kind, str):
        return NAMED[kind]
    head, *rest = kind
    if head == "int":
        return k.whole(*rest)
    if head == "choice":
        return k.choice(*rest)
    raise KeyError(kind)
