"""The CLI's contract, generated from its own parser: every option of every subcommand,
given each wrong value of its kind, is answered with exactly one line on stderr that names
the option and the value, exit status 2, no traceback, nothing written and nothing long
started (no event loop, no child process, no build, no Spark), within a few seconds.

KINDS classifies every option; an option missing from it fails test_every_option_is_
classified, so a new option gets its wrong values as soon as it exists. The commands run
in-process through main(argv); what would be long work raises LongWork instead."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pubmote.cli import main as cli

CASE_S = 10.0  # a wrong value is answered at once: far below any real work
PEER = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"
PUBKEY = "77ff84905a91936367c01360803104f92432fcd904a43511876df5cdf3e7e548"
# the work the base arguments would start is refused by LongWork before it runs
pytestmark = pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
UNWRITABLE = ("/proc/pubmote-contract", "/sys/pubmote-contract")  # no one creates files there


class LongWork(BaseException):
    """Raised where a command would start long work; BaseException so no handler of the
    command's own catches it."""


class Workspace:
    """Files and folders the cases point at, in a scratch folder that must be unchanged
    after every case."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "home").mkdir()
        self.text = root / "notes.txt"
        self.text.write_text("just some notes\n")
        self.binary = root / "blob.bin"
        self.binary.write_bytes(b"\x00\xff\xfe\x89PNG\r\n\x1a\n" + bytes(range(256)))
        self.latin1 = root / "latin1.txt"
        self.latin1.write_bytes("caf\xe9 = 1\n".encode("latin-1"))
        self.empty = root / "empty.txt"
        self.empty.write_bytes(b"")
        self.json_array = root / "array.json"
        self.json_array.write_text("[1, 2, 3]\n")
        self.loose = root / "loose.key"  # a key anyone may read
        self.loose.write_text("00" * 32 + "\n")
        self.loose.chmod(0o644)
        self.update_app = root / "anapp"  # an app folder for `pubmote update`
        self.update_app.mkdir()
        (self.update_app / "app.py").write_text("async def main(node):\n    pass\n")
        self.folder = root / "afolder"
        self.folder.mkdir()
        self.missing = root / "nothere"
        self.in_missing = root / "nofolder" / "x"
        self.under_file = self.text / "x"  # a path whose folder is a file
        self.journal = root / "journal"
        self.journal.mkdir()
        self.app = root / "myapp.py"
        self.app.write_text("async def main(node):\n    pass\n")
        self.fw_bin = root / "fw.bin"
        self.fw_bin.write_bytes(b"\xe9" + bytes(4095))
        from pubmote.core.tlscert import make_gateway_cert

        self.cert, self.key = make_gateway_cert(root / "tls")
        from pubmote.dht.bep44 import KeyPair

        self.dht_key = root / "dht.key"
        KeyPair.load(self.dht_key, create=True)
        self.mesh_key = root / "mesh.key"
        from pubmote.p2p.identity import load_or_create_key

        load_or_create_key(self.mesh_key)
        master, slave = os.openpty()
        self._fds = (master, slave)
        self.tty = os.ttyname(slave)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)

    def unreadable(self) -> list[str]:
        """Files that exist but cannot be read (as root: a write-only procfs file)."""
        if os.geteuid() == 0:
            p = "/proc/sys/vm/compact_memory"
            return [p] if os.path.exists(p) and not os.access(p, os.R_OK) else []
        f = self.root / "secret.txt"
        if not f.exists():
            f.write_text("x")
            f.chmod(0)
        return [str(f)]

    def unwritable_folders(self) -> list[str]:
        """Folders in which nothing can be created."""
        out = ["/proc", "/sys"]
        if os.geteuid() != 0:
            d = self.root / "readonly"
            if not d.exists():
                d.mkdir()
                d.chmod(0o555)
            out.append(str(d))
        return out


def _files_in(kind: str, ws: Workspace) -> list[str]:
    return {
        "missing": [str(ws.missing)],
        "in_missing": [str(ws.in_missing)],
        "folder": [str(ws.folder)],
        "file": [str(ws.text)],
        "under_file": [str(ws.under_file)],
        "binary": [str(ws.binary)],
        "latin1": [str(ws.latin1)],
        "empty": [str(ws.empty)],
        "json_array": [str(ws.json_array)],
        "unreadable": ws.unreadable(),
        "unwritable": list(UNWRITABLE) + [d + "/x" for d in ws.unwritable_folders()[2:]],
        "": [""],
    }[kind]


def _paths(ws: Workspace, *kinds: str) -> list[str]:
    return [p for k in kinds for p in _files_in(k, ws)]


# kind -> wrong values (each a value, or (extra argv, value) when the value is wrong only
# beside another option)
Values = list[Any]
WRONG: dict[str, Callable[[Workspace], Values]] = {
    # files and folders
    "file_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "under_file",
                                 "unreadable"),
    "text_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "under_file",
                                 "unreadable", "binary", "latin1"),
    "toml_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "under_file",
                                 "unreadable", "binary", "latin1", "file"),
    "py_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "unreadable",
                               "binary", "latin1", "file"),
    "cert_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "unreadable",
                                 "binary", "file", "empty"),
    "tls_key_in": lambda ws: [*_paths(ws, "", "missing", "in_missing", "folder", "binary",
                                      "empty"), str(ws.loose)],
    "trace_in": lambda ws: _paths(ws, "", "missing", "in_missing", "folder", "unreadable",
                                  "binary", "file", "empty", "json_array"),
    # key files made when missing (mesh, DHT): a wrong folder, or a file that is no key
    "key_file": lambda ws: [*_paths(ws, "", "in_missing", "folder", "under_file", "binary",
                                    "file", "empty", "unwritable"), str(ws.loose)],
    "key_in": lambda ws: [*_paths(ws, "", "missing", "in_missing", "folder", "binary", "file",
                                  "empty"), str(ws.loose)],
    # the boards' keys (JSON): read, and written after a deploy
    "keys_json": lambda ws: [*_paths(ws, "", "in_missing", "folder", "under_file", "binary",
                                     "file", "unwritable", "json_array"), str(ws.loose)],
    "keys_json_in": lambda ws: [*_paths(ws, "", "missing", "in_missing", "folder", "binary",
                                        "file", "empty", "json_array"), str(ws.loose)],
    "file_out": lambda ws: _paths(ws, "", "in_missing", "folder", "under_file", "unwritable",
                                  "binary"),
    "folder_in": lambda ws: _paths(ws, "", "missing", "file", "under_file"),
    "journal_in": lambda ws: [*_paths(ws, "", "missing", "file", "under_file"), "/proc/sys"],
    "mp_tree": lambda ws: _paths(ws, "", "missing", "file", "under_file", "folder"),
    "folder_out": lambda ws: _paths(ws, "", "file", "under_file", "unwritable"),
    # addresses
    "port": lambda ws: ["-1", "65536", "70000", "abc", "1.5", ""],
    "hostport": lambda ws: ["nocolon", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:abc",
                            ":", "", "127.0.0.1:-1"],
    "host": lambda ws: ["999.1.1.1", "no such host!", ""],
    "source_net": lambda ws: ["10.0.0.0/33", "999.1.1.1", "nope", "192.168.1.0/24/8", ""],
    "sp_url": lambda ws: ["http://127.0.0.1:5560", "tcp://", "tcp://127.0.0.1",
                          "tcp://127.0.0.1:70000", "ipc://", "127.0.0.1:5560", "",
                          "ipc://" + str(ws.in_missing), "ipc://" + str(ws.text),
                          "ipc://" + str(ws.folder), "unix://" + str(ws.root / "s")],
    "ndn_url": lambda ws: ["http://127.0.0.1:6363", "tcp://", "tcp://127.0.0.1:70000",
                           "unix://", "127.0.0.1:6363", "",
                           "unix://" + str(ws.in_missing), "unix://" + str(ws.text),
                           "ipc://" + str(ws.root / "s")],
    "client_url": lambda ws: ["http://127.0.0.1:5560", "tcp://", "tcp://127.0.0.1",
                              "tcp://127.0.0.1:70000", "ipc://", "127.0.0.1:5560", "",
                              "ipc://" + str(ws.text), "ipc://" + str(ws.folder)],
    "serial": lambda ws: [str(ws.text), str(ws.folder), "/dev/null", ws.tty + ":abc",
                          ws.tty + ":9", ""],
    "serial_port": lambda ws: [str(ws.text), str(ws.folder), "/dev/null", ""],
    "multiaddr": lambda ws: ["/ip4/127.0.0.1", "garbage", "/ip4/999.1.1.1/tcp/1",
                             "/ip4/127.0.0.1/tcp/70000", "/ip4/127.0.0.1/udp/1", ""],
    "peer_multiaddr": lambda ws: ["/ip4/127.0.0.1", "garbage", "/ip4/999.1.1.1/tcp/1/p2p/"
                                  + PEER, "/ip4/127.0.0.1/tcp/4001",
                                  "/ip4/127.0.0.1/tcp/4001/p2p/notapeer", ""],
    "peer_or_key": lambda ws: ["nonsense", "", str(ws.binary), str(ws.folder)],
    # numbers
    "count": lambda ws: ["0", "-1", "abc", "1.5", ""],
    "count0": lambda ws: ["-1", "abc", "1.5", ""],
    "sim_boards": lambda ws: ["-1", "65", "abc", "1.5", ""],
    "ms": lambda ws: ["0", "-5", "abc", "1.5", ""],
    "bytes": lambda ws: ["0", "-1", "abc", "8M", ""],
    "seconds": lambda ws: ["0", "-1", "abc", "nan", "inf", ""],
    "seconds0": lambda ws: ["-1", "abc", "nan", "inf", ""],
    "days": lambda ws: ["0", "-1", "abc", "1e9", ""],
    # text with a form
    "choice": lambda ws: ["bogus", ""],
    "board": lambda ws: ["bogus", ""],
    "chip": lambda ws: ["bogus", ""],
    "json_object": lambda ws: ["{bad", "[1]", "1", "null", "", '{"period_ms": "abc"}'],
    "name": lambda ws: ["a/b", "with space", "", "*", "x" * 65, "a|b"],
    "realm": lambda ws: ["a/b", "", "with space"],
    "topic_root": lambda ws: ["a/b", ""],
    "ndn_prefix": lambda ws: ["noslash", "", "/a/%zz"],
    "topic": lambda ws: ["noslash", "", "/a/%zz"],
    "module": lambda ws: ["no-such-app!", "", "a/b", "1abc", "nosuchapp"],
    "pubkey": lambda ws: ["zz", "abcd", "", "g" * 64],
    "salt": lambda ws: ["x" * 65],
    "duration": lambda ws: ["banana", "", "-1 minute", "1"],
    "connect_url": lambda ws: ["", "127.0.0.1:15002", "http://127.0.0.1:15002", "sc://",
                               "sc://127.0.0.1:abc", "sc://127.0.0.1:0"],
    "conf": lambda ws: ["novalue", "=x", ""],
    "set": lambda ws: ["noequal", "period_ms=abc", "=1", "period_ms=-5", "name=a/b"],
    "dns_name": lambda ws: ["", "has space", "a/b", "-bad-"],
    "packet_hex": lambda ws: ["zz", "abc", "0g"],
    "dht_value": lambda ws: [(["--hex"], "zz"), (["--hex"], "abc")],
    "payload": lambda ws: [(["--json"], "{bad"), (["--hex"], "zz"), (["--hex"], "abc")],
    # anything goes: no wrong value (the reason is in KINDS' comment)
    "free": lambda ws: [],
    "flag": lambda ws: [],
}

# (command, option) -> kind; the option is its first flag, or a positional's dest
KINDS: dict[tuple[tuple[str, ...], str], str] = {
    (("bridge",), "--sim-boards"): "sim_boards",
    (("bridge",), "--sim-kind"): "choice",
    (("bridge",), "--sim-dir"): "folder_out",
    (("bridge",), "--sim-period-ms"): "ms",
    (("bridge",), "--sim-app"): "module",
    (("bridge",), "--sim-app-dir"): "folder_in",
    (("bridge",), "--sim-app-config"): "json_object",
    (("bridge",), "--sim-keys"): "flag",
    (("bridge",), "--serial"): "serial",
    (("bridge",), "--udp"): "hostport",
    (("bridge",), "--tcp"): "hostport",
    (("bridge",), "--tcp-tls-cert"): "cert_in",
    (("bridge",), "--tcp-tls-key"): "tls_key_in",
    (("bridge",), "--board-links-require-encryption"): "flag",
    (("bridge",), "--allow-anonymous-boards"): "flag",
    (("bridge",), "--sp-pub"): "sp_url",
    (("bridge",), "--sp-sub"): "sp_url",
    (("bridge",), "--ndn-face"): "ndn_url",
    (("bridge",), "--sp-sub-allow-from"): "source_net",
    (("bridge",), "--sp-sub-allow-topics"): "ndn_prefix",
    (("bridge",), "--ndn-allow-from"): "source_net",
    (("bridge",), "--ndn-allow-prefixes"): "ndn_prefix",
    (("bridge",), "--trace"): "file_out",
    (("bridge",), "--keys"): "keys_json_in",
    (("bridge",), "--require-signed"): "ndn_prefix",
    (("bridge",), "--journal"): "folder_out",
    (("bridge",), "--sleep-queue-max"): "count",
    (("bridge",), "--sleep-queue-bytes"): "bytes",
    (("bridge",), "--session-expiry-s"): "seconds",
    (("bridge",), "--journal-max-bytes"): "bytes",
    (("bridge",), "--journal-max-age"): "seconds",
    (("bridge",), "--journal-fsync"): "choice",
    (("bridge",), "--gateway"): "name",
    (("bridge",), "--name"): "name",
    (("bridge",), "--mesh-listen"): "multiaddr",
    (("bridge",), "--mesh-peer"): "peer_multiaddr",
    (("bridge",), "--realm"): "realm",
    (("bridge",), "--realm-member"): "peer_or_key",
    (("bridge",), "--mesh-key-file"): "key_file",
    (("bridge",), "--mesh-topic"): "topic_root",
    (("bridge",), "--config"): "toml_in",
    (("bridge",), "--view"): "flag",
    (("bridge",), "--no-view"): "flag",
    (("bridge",), "--status-every"): "seconds",
    (("bridge",), "-v"): "flag",
    (("sim",), "--boards"): "sim_boards",
    (("sim",), "--dir"): "folder_out",
    (("sim",), "--kind"): "choice",
    (("sim",), "--period-ms"): "ms",
    (("sim",), "--app"): "module",
    (("sim",), "--app-dir"): "folder_in",
    (("sim",), "--app-config"): "json_object",
    (("sim",), "--keys"): "flag",
    (("firmware", "build"), "--board"): "choice",
    (("firmware", "build"), "--micropython"): "mp_tree",
    (("firmware", "build"), "--out"): "folder_out",
    (("firmware", "build"), "--app"): "py_in",
    (("flash",), "--board"): "board",
    (("flash",), "--port"): "serial_port",
    (("flash",), "--firmware"): "file_in",
    (("flash",), "--erase"): "flag",
    (("flash",), "--chip"): "chip",
    (("flash",), "--connect-attempts"): "count",
    (("update",), "boards"): "name",
    (("update",), "--app"): "folder_in",
    (("update",), "--config"): "set",
    (("update",), "--all"): "flag",
    (("update",), "--canary"): "count0",
    (("update",), "--timeout"): "seconds",
    (("update",), "--grace"): "seconds",
    (("update",), "--status"): "flag",
    (("deploy",), "--board"): "board",
    (("deploy",), "--port"): "serial_port",
    (("deploy",), "--name"): "name",
    (("deploy",), "--link"): "choice",
    (("deploy",), "--set"): "set",
    (("deploy",), "--no-reset"): "flag",
    (("deploy",), "--key-file"): "keys_json",
    (("deploy",), "--gateway-cert"): "cert_in",
    (("deploy",), "--timeout"): "seconds",
    (("simdev",), "--dir"): "folder_out",
    (("dissect",), "hex"): "packet_hex",
    (("dissect",), "--trace"): "trace_in",
    (("pipeline",), "journal"): "journal_in",
    (("pipeline",), "--out"): "folder_out",
    (("pipeline",), "--follow"): "flag",
    (("pipeline",), "--checkpoint"): "folder_out",
    (("pipeline",), "--report"): "folder_out",
    (("pipeline",), "--master"): "free",  # Spark's own master URL, passed through
    (("pipeline",), "--conf"): "conf",
    (("pipeline",), "--window"): "duration",
    (("pipeline",), "--watermark"): "duration",
    (("pipeline",), "--trigger-seconds"): "seconds",
    (("pipeline",), "--max-files-per-trigger"): "count",
    (("pipeline",), "--late-ms"): "count0",
    (("pipeline",), "--reading-key"): "free",  # any CBOR map key may hold the reading
    (("pipeline",), "-v"): "flag",
    (("pipeline",), "--remote"): "connect_url",
    (("pipeline", "serve"), "--port"): "port",
    (("pipeline", "serve"), "--host"): "host",
    (("pipeline", "serve"), "--allow-remote-clients"): "flag",
    (("pipeline", "serve"), "--master"): "free",  # Spark's own master URL, passed through
    (("pipeline", "serve"), "--conf"): "conf",
    (("pipeline", "serve"), "-v"): "flag",
    (("mesh", "id"), "--key-file"): "key_file",
    (("mesh", "id"), "--listen"): "multiaddr",
    (("mesh", "ping"), "addr"): "peer_multiaddr",
    (("mesh", "ping"), "--count"): "count",
    (("mesh", "ping"), "--timeout"): "seconds",
    (("mesh", "ping"), "--key-file"): "key_in",
    (("mesh", "serve"), "--key-file"): "key_file",
    (("mesh", "serve"), "--listen"): "multiaddr",
    (("dht", "keygen"), "--key-file"): "key_file",
    (("dht", "put"), "value"): "dht_value",
    (("dht", "put"), "--key-file"): "key_in",
    (("dht", "put"), "--salt"): "salt",
    (("dht", "put"), "--seq"): "count0",
    (("dht", "put"), "--hex"): "flag",
    (("tls", "init"), "--dir"): "folder_out",
    (("tls", "init"), "--name"): "dns_name",
    (("tls", "init"), "--host"): "dns_name",
    (("tls", "init"), "--days"): "days",
    (("tls", "init"), "--force"): "flag",
    (("tls", "show"), "cert"): "cert_in",
    (("sub",), "url"): "client_url",
    (("sub",), "prefix"): "free",  # byte prefixes: any text is one
    (("sub",), "--json"): "flag",
    (("sub",), "--count"): "count",
    (("sub",), "--late-ms"): "count0",
    (("pub",), "url"): "client_url",
    (("pub",), "topic"): "topic",
    (("pub",), "payload"): "payload",
    (("pub",), "--json"): "flag",
    (("pub",), "--hex"): "flag",
    (("pub",), "--count"): "count",
    (("pub",), "--interval"): "seconds0",
}
for _act in ("put", "get", "subscribe", "node"):
    KINDS.update({
        (("dht", _act), "--bootstrap"): "hostport",
        (("dht", _act), "--port"): "port",
        (("dht", _act), "--bind"): "host",
        (("dht", _act), "--timeout"): "seconds",
    })
for _act in ("get", "subscribe"):
    KINDS.update({(("dht", _act), "--pubkey"): "pubkey", (("dht", _act), "--salt"): "salt"})
KINDS[(("dht", "subscribe"), "--count")] = "count"


def base_argv(cmd: tuple[str, ...], ws: Workspace) -> dict[str, list[str]]:
    """Arguments that make `cmd` valid (it would start its work): option -> its argv;
    a positional under its dest."""
    r = ws.root
    bootstrap = {"--bootstrap": ["--bootstrap", "127.0.0.1:9"]}
    bases: dict[tuple[str, ...], dict[str, list[str]]] = {
        ("bridge",): {"--no-view": ["--no-view"], "--sp-pub": ["--sp-pub", "none"],
                      "--sp-sub": ["--sp-sub", "none"], "--sim-boards": ["--sim-boards", "1"],
                      "--sim-dir": ["--sim-dir", str(r / "sim")]},
        ("sim",): {"--dir": ["--dir", str(r / "simdir")], "--boards": ["--boards", "1"]},
        ("firmware", "build"): {"--out": ["--out", str(r / "fw")]},
        ("flash",): {"--board": ["--board", "esp32"], "--port": ["--port", ws.tty],
                     "--firmware": ["--firmware", str(ws.fw_bin)]},
        ("deploy",): {"--board": ["--board", "unix"], "--port": ["--port", ws.tty]},
        ("simdev",): {"--dir": ["--dir", str(r / "dev")]},
        ("update",): {"--app": ["--app", str(ws.update_app)], "boards": ["sim1"]},
        ("dissect",): {"hex": ["05050703080161"]},
        ("pipeline",): {"journal": [str(ws.journal)], "--out": ["--out", str(r / "tables")]},
        ("pipeline", "serve"): {},
        ("mesh", "id"): {"--key-file": ["--key-file", str(ws.mesh_key)]},
        ("mesh", "ping"): {"addr": ["/ip4/127.0.0.1/tcp/9/p2p/" + PEER]},
        ("mesh", "serve"): {"--key-file": ["--key-file", str(ws.mesh_key)],
                            "--listen": ["--listen", "/ip4/127.0.0.1/tcp/0"]},
        ("dht", "keygen"): {"--key-file": ["--key-file", str(r / "new-dht.key")]},
        ("dht", "put"): {"--key-file": ["--key-file", str(ws.dht_key)], "value": ["hello"],
                         **bootstrap},
        ("dht", "get"): {"--pubkey": ["--pubkey", PUBKEY], **bootstrap},
        ("dht", "subscribe"): {"--pubkey": ["--pubkey", PUBKEY], **bootstrap},
        ("dht", "node"): {**bootstrap},
        ("tls", "init"): {"--dir": ["--dir", str(r / "newtls")]},
        ("tls", "show"): {"cert": [str(ws.cert)]},
        ("sub",): {"url": ["tcp://127.0.0.1:9"]},
        ("pub",): {"url": ["tcp://127.0.0.1:9"], "topic": ["/a/b"], "payload": ["hi"]},
    }
    return bases[cmd]


# what another option must say for an option's wrong values to be its own mistake
CONTEXT: dict[tuple[tuple[str, ...], str], Callable[[Workspace], dict[str, list[str]]]] = {
    (("bridge",), "--tcp-tls-cert"): lambda ws: {
        "--tcp-tls-key": ["--tcp-tls-key", str(ws.key)], "--tcp": ["--tcp", "127.0.0.1:0"]},
    (("bridge",), "--tcp-tls-key"): lambda ws: {
        "--tcp-tls-cert": ["--tcp-tls-cert", str(ws.cert)], "--tcp": ["--tcp", "127.0.0.1:0"]},
    (("deploy",), "--gateway-cert"): lambda ws: {"--link": ["--link", "tcp"],
                                                 "--set": ["--set", "host=127.0.0.1"]},
    (("pipeline",), "--checkpoint"): lambda ws: {"--follow": ["--follow"]},
}


def leaf_parsers() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that runs something: (its words, its parser)."""
    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, p
        for s in subs:
            for name, child in s.choices.items():
                yield from walk(child, (*path, name))
        # a command whose first positional is data, with a subcommand beside it
        # (`pipeline JOURNAL_DIR` and `pipeline serve`)
        for name, child in getattr(p, "subcommands", {}).items():
            yield from walk(child, (*path, name))
    yield from walk(cli.build_parser(), ())


def option_id(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    out = []
    for path, p in leaf_parsers():
        for a in p._actions:
            if isinstance(a, argparse._HelpAction | argparse._VersionAction):
                continue
            out.append((path, a))
    return out


def test_every_option_is_classified() -> None:
    seen = {(path, option_id(a)) for path, a in options()}
    assert sorted(seen - set(KINDS)) == [], "classify these options in KINDS"
    assert sorted(set(KINDS) - seen) == [], "KINDS names options that are gone"
    assert {k for k in KINDS.values()} <= set(WRONG)
    # every command with options has a base that would start it
    assert {path for path, _ in seen} <= {path for path, _ in KINDS}


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under root: its mode, and a file's size and time (a folder's
    time changes when a check tries whether it takes new files, which leaves nothing)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = (os.lstat(p).st_mode, 0, 0)
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    w = Workspace(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("MICROPY_DIR", raising=False)
    monkeypatch.setenv("PUBMOTE_UF2_DRIVE", str(tmp_path / "nodrive"))
    monkeypatch.chdir(tmp_path)
    _forbid_long_work(monkeypatch)
    yield w
    w.close()


def _forbid_long_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def long_work(what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            for a in args:  # a coroutine handed to asyncio.run: never awaited, say so quietly
                if asyncio.iscoroutine(a):
                    a.close()
            raise LongWork(what)
        return refuse

    import pubmote.boards.deploy
    import pubmote.boards.fwbuild
    import pubmote.cli.update
    import pubmote.pipeline.backlog
    import pubmote.pipeline.session

    monkeypatch.setattr(asyncio, "run", long_work("an event loop"))
    monkeypatch.setattr(asyncio, "Runner", long_work("an event loop"))  # cli.common.run_async
    monkeypatch.setattr(subprocess.Popen, "__init__", long_work("a child process"))
    monkeypatch.setattr(pubmote.boards.fwbuild, "build", long_work("the firmware build"))
    monkeypatch.setattr(pubmote.boards.deploy, "deploy", long_work("the deploy"))
    monkeypatch.setattr(pubmote.cli.update, "_connect", long_work("the bridge's control"))
    monkeypatch.setattr(pubmote.pipeline.session, "spark_session", long_work("Spark"))
    monkeypatch.setattr(pubmote.pipeline.backlog, "prepare_soon", long_work("compaction"))


def _argv(cmd: tuple[str, ...], parts: dict[str, list[str]], parser: argparse.ArgumentParser
          ) -> list[str]:
    """The command line: options first, then positionals in the parser's order."""
    positional = [a.dest for a in parser._actions if not a.option_strings]
    argv = list(cmd)
    for k, v in parts.items():
        if k not in positional:
            argv += v
    for dest in positional:
        argv += parts.get(dest, [])
    return argv


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]
            ) -> tuple[Any, str, str, float]:
    """main(argv) in-process: (exit status or what went wrong, stdout, stderr, seconds)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    t0 = time.monotonic()
    try:
        code: Any = cli.main(argv)
    except SystemExit as e:
        code = e.code
    except LongWork as e:
        code = "started %s" % e
    except Exception as e:  # noqa: BLE001 - what a user would see as a traceback
        code = "traceback: %s: %s" % (type(e).__name__, e)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    return code, out, err, took


def _names(action: argparse.Action) -> list[str]:
    if action.option_strings:
        return list(action.option_strings)
    return [n for n in (action.metavar, action.dest) if isinstance(n, str)]


def _shows(line: str, value: str) -> bool:
    if value == "":
        return "''" in line or '""' in line or "empty" in line
    return value in line or repr(value) in line or os.path.abspath(value) in line


def cases(cmd: tuple[str, ...], action: argparse.Action, ws: Workspace
          ) -> list[tuple[list[str], str]]:
    """(argv, value) for each wrong value of the option."""
    parser = dict(leaf_parsers())[cmd]
    key = option_id(action)
    out = []
    for wrong in WRONG[KINDS[(cmd, key)]](ws):
        extra, value = wrong if isinstance(wrong, tuple) else ([], wrong)
        parts = dict(base_argv(cmd, ws))
        ctx = CONTEXT.get((cmd, key))
        if ctx is not None:
            parts.update(ctx(ws))
        for e in extra:
            parts[e] = [e]
        flag = action.option_strings[-1] if action.option_strings else None
        parts[key] = [flag + "=" + value] if flag else [value]  # = keeps "-1" a value
        out.append((_argv(cmd, parts, parser), value))
    return out


def check_case(argv: list[str], value: str, action: argparse.Action, ws: Workspace,
               capsys: pytest.CaptureFixture[str]) -> str | None:
    """What is wrong with how the CLI answers one wrong value (None: nothing)."""
    before = _snapshot(ws.root)
    code, _out, err, took = run_cli(argv, capsys)
    lines = err.splitlines()
    problems = []
    if code != 2:
        problems.append("exit %r" % (code,))
    if "Traceback" in err:
        problems.append("a traceback")
    if len(lines) != 1:
        problems.append("%d lines on stderr" % len(lines))
    elif not any(n in lines[0] for n in _names(action)):
        problems.append("the line does not name %s" % "/".join(_names(action)))
    elif not _shows(lines[0], value):
        problems.append("the line does not show the value")
    after = _snapshot(ws.root)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problems.append("wrote %s" % ", ".join(changed))
    if took > CASE_S:
        problems.append("took %.1f s" % took)
    if not problems:
        return None
    return "%s -> %s [%s]" % (" ".join(argv), "; ".join(problems), err.strip()[-300:])


def _option_ids() -> list[tuple[tuple[str, ...], str]]:
    return [(path, option_id(a)) for path, a in options()
            if KINDS.get((path, option_id(a))) not in ("flag", "free", None)]


@pytest.mark.parametrize(("cmd", "key"), _option_ids(),
                         ids=["%s %s" % (" ".join(c), k) for c, k in _option_ids()])
def test_wrong_values_get_one_line(cmd: tuple[str, ...], key: str, ws: Workspace,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    action = next(a for p, a in options() if p == cmd and option_id(a) == key)
    tried = cases(cmd, action, ws)
    assert tried, "kind %s has no wrong values" % KINDS[(cmd, key)]
    failed = [f for f in (check_case(argv, value, action, ws, capsys) for argv, value in tried)
              if f is not None]
    if failed:
        pytest.fail("%d of %d wrong values:\n%s" % (len(failed), len(tried), "\n".join(failed)),
                    pytrace=False)


@pytest.mark.parametrize("cmd", sorted({p for p, _ in KINDS}), ids=" ".join)
def test_the_base_command_line_is_valid(cmd: tuple[str, ...], ws: Workspace,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The control: each command's base arguments get past every check to the work itself
    (or do it, for the quick ones), so the wrong values above are what the CLI refuses."""
    parser = dict(leaf_parsers())[cmd]
    code, _out, err, _took = run_cli(_argv(cmd, base_argv(cmd, ws), parser), capsys)
    assert code == 0 or str(code).startswith("started "), (code, err)


@pytest.mark.parametrize("cmd", sorted({p for p, k in KINDS if KINDS[(p, k)] not in
                                        ("flag", "free")}), ids=" ".join)
def test_the_installed_command_answers_the_same(cmd: tuple[str, ...], tmp_path: Path) -> None:
    """The real `pubmote` executable, for the first wrong value of each command's first
    option that takes one: the same one line and exit status 2 (what in-process capsys
    saw is what a terminal sees)."""
    w = Workspace(tmp_path)
    try:
        action = next(a for p, a in options() if p == cmd and KINDS[(p, option_id(a))]
                      not in ("flag", "free"))
        argv, value = cases(cmd, action, w)[0]
        r = subprocess.run([str(Path(sys.executable).parent / "pubmote"), *argv],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env=dict(os.environ, HOME=str(tmp_path / "home")))
    finally:
        w.close()
    assert r.returncode == 2, (argv, r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert any(n in lines[0] for n in _names(action)) and _shows(lines[0], value), r.stderr


def count_pairs(root: Path) -> int:
    """How many (option, wrong value) pairs the contract tries."""
    w = Workspace(root)
    try:
        return sum(len(cases(c, a, w)) for c, a in options()
                   if KINDS.get((c, option_id(a))) not in ("flag", "free", None))
    finally:
        w.close()


def test_the_contract_tries_every_kind_of_mistake(tmp_path: Path) -> None:
    n = count_pairs(tmp_path)
    print("%d (option, wrong value) pairs" % n)
    assert n >= 500


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print(count_pairs(Path(d)))
    sys.exit(0)
