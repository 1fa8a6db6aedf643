"""The bridge's configuration has one source of truth: the table in gateway/config.py.
Each flag is the key of its name, `bridge --help` lists every key, docs/gateway.toml shows
every key and loads, an unknown key suggests the closest one, and every key refuses the
wrong values of its kind at load, naming the key, whether or not its feature is on."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pubmote.cli.bridge_flags import CLI_ONLY
from pubmote.cli.config_check import ConfigError, check
from pubmote.cli.config_kinds import resolve
from pubmote.cli.main import build_parser
from pubmote.gateway.config import ALIASES, KEYS, load_config

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "gateway.toml"
COMMENTED = re.compile(r"^# ([a-z_]+) = (.+?)(\s+#.*)?$")


def bridge_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices["bridge"]
    return parser


def test_every_flag_is_the_key_of_its_name() -> None:
    for a in bridge_parser()._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        if a.dest in CLI_ONLY:
            continue
        assert a.dest in KEYS, "flag %s sets no config key" % a.option_strings
        assert "--" + a.dest.replace("_", "-") in a.option_strings, (a.dest, a.option_strings)


def test_help_lists_every_key() -> None:
    text = bridge_parser().format_help()
    for key in KEYS:
        flag = "--" + key.replace("_", "-")
        assert flag in text or re.search(r"^  %s " % key, text, re.M), key
    for alias in ALIASES:
        assert alias in text


def _example() -> tuple[dict[str, Any], dict[str, str]]:
    text = EXAMPLE.read_text()
    active = tomllib.loads(text)
    commented = {}
    for line in text.splitlines():
        m = COMMENTED.match(line)
        if m and m.group(1) in KEYS:
            commented[m.group(1)] = m.group(2)
    return active, commented


def test_the_example_names_every_key_and_loads() -> None:
    active, commented = _example()
    assert set(active) | set(commented) == set(KEYS), "docs/gateway.toml misses keys"
    assert not set(active) & set(commented)
    cfg = load_config(str(EXAMPLE), {})
    check(cfg)
    for key, value in active.items():
        assert cfg[key] == value
    # the examples that are commented out are of their key's kind (files aside: the
    # example's paths are not on this machine)
    for key, literal in commented.items():
        value = tomllib.loads("v = %s" % literal)["v"]
        kind = KEYS[key][1]
        if kind in ("cert_in", "tls_key_in", "board_keys_in", "dht_key", "mesh_key",
                    "folder_in", "folder_out", "trace_out"):
            assert isinstance(value, str) and value.startswith("/")
        else:
            resolve(kind)(value)


def _typos(key: str) -> list[str]:
    mid = len(key) // 2
    return [key[:-1], key[:mid] + key[mid + 1:], key[:mid] + key[mid + 1] + key[mid] +
            key[mid + 2:], key.replace("_", "-")]


@pytest.mark.parametrize("key", sorted(KEYS))
def test_an_unknown_key_suggests_the_closest(key: str, tmp_path: Path) -> None:
    conf = tmp_path / "gw.toml"
    for typo in _typos(key):
        if typo in KEYS or typo in ALIASES:
            continue
        conf.write_text("%s = 1\n" % typo if "-" not in typo else '"%s" = 1\n' % typo)
        with pytest.raises(ValueError) as e:
            load_config(str(conf), {})
        said = str(e.value)
        m = re.search(r"did you mean (\w+)\?", said)
        assert "unknown key %s" % typo in said and m, said
        assert ALIASES.get(m.group(1), m.group(1)) == key or m.group(1) in KEYS, said


# kind -> wrong TOML values (as TOML literals); a list key gets each as its one entry too
WRONG: dict[str, list[str]] = {
    "int": ['"abc"', "1.5", "true", "-1000000"],
    "seconds": ['"x"', "0", "-1", "true", "nan", "inf"],
    "choice": ['"sometimes"', "5", '""'],
    "bool": ['"yes"', "1"],
    "name": ['"a/b"', '""', "5", '"with space"'],
    "realm": ['"a/b"', '""'],
    "topic_root": ['"a/b"', '""'],
    "ndn_name": ['"noslash"', '""', "5"],
    "module": ['"no-such!"', '""', "5"],
    "pubkey": ['"zz"', '"abcd"', "5"],
    "board_config": ["5", '"{}"', "{ period_ms = \"abc\" }", "{ period_ms = 0 }"],
    "port": ["70000", "-1", '"6881"'],
    "host": ['"no such host!"', '""', "5"],
    "hostport": ['"nocolon"', '"127.0.0.1:70000"', '""', "5"],
    "source_net": ['"10.0.0.0/33"', '"nope"', '"999.1.1.1"', '""', "5"],
    "sp_url": ['"http://x:1"', '"tcp://127.0.0.1:70000"', '"ipc://"', "5"],
    "ndn_url": ['"http://x:1"', '"ipc:///tmp/x"', '"unix://"', "5"],
    "serial": ['"/dev/null"', '"/dev/ttyNOPE:abc"', "5"],
    "multiaddr": ['"garbage"', '"/ip4/127.0.0.1/udp/1"', "5"],
    "peer_multiaddr": ['"/ip4/127.0.0.1/tcp/1"', '"/ip4/127.0.0.1/tcp/1/p2p/nope"', "5"],
    "peer_or_key": ['"nonsense"', "5"],
}
PATHS = ["cert_in", "tls_key_in", "board_keys_in", "dht_key", "mesh_key", "folder_in",
         "folder_out", "trace_out"]


def _wrong(kind: Any, tmp: Path) -> list[str]:
    name = kind if isinstance(kind, str) else kind[0]
    if name in PATHS:
        blob = tmp / "blob.bin"
        blob.write_bytes(b"\x00\xff" * 8)
        afile = tmp / "notes.txt"
        afile.write_text("x")
        wrong = ['""', "5", '"%s"' % (afile / "sub")]
        if name != "folder_out":  # a folder to write in is made when missing
            wrong.append('"%s"' % (tmp / "no" / "such" / "file"))
        return wrong + (['"%s"' % afile] if name.startswith("folder") else
                        ['"%s"' % tmp, '"%s"' % blob])
    values = list(WRONG[name])
    if name == "int" and len(kind) > 2:
        values.append(str(kind[2] + 1))
    return values


def _key_ids() -> list[str]:
    return sorted(KEYS)


@pytest.mark.parametrize("key", _key_ids())
def test_every_key_refuses_wrong_values_naming_it(key: str, tmp_path: Path) -> None:
    """One key at a time, so a feature that is off (journal_fsync without a journal) is
    checked as well; each refusal is one line naming the key and its flag."""
    default, kind, _what = KEYS[key]
    literals = _wrong(kind, tmp_path)
    if isinstance(default, list):
        literals = [lit for x in literals for lit in (x, "[%s]" % x)]
    conf = tmp_path / "gw.toml"
    accepted = []
    for lit in literals:
        conf.write_text("%s = %s\n" % (key, lit))
        try:
            check(load_config(str(conf), {}))
        except ConfigError as e:
            line = str(e)
            assert "\n" not in line and "TOML key %s" % key in line, line
            continue
        accepted.append(lit)
    assert accepted == [], "%s accepted %s" % (key, accepted)


def test_the_flags_names_work_as_keys(tmp_path: Path) -> None:
    conf = tmp_path / "gw.toml"
    conf.write_text('journal_max_age = 5\nmesh_topic = ["pubmote"]\n')
    cfg = load_config(str(conf), {})
    assert cfg["journal_max_age"] == 5 and cfg["mesh_topic"] == ["pubmote"]
    conf.write_text('journal_max_age_s = 7\nmesh_topics = ["x"]\n')  # the older names
    cfg = load_config(str(conf), {})
    assert cfg["journal_max_age"] == 7 and cfg["mesh_topic"] == ["x"]
    conf.write_text("journal_max_age_s = 7\njournal_max_age = 8\n")
    with pytest.raises(ValueError, match="one key"):
        load_config(str(conf), {})
    # the bridge's sections work too
    conf.write_text('[bridge]\njournal_fsync = "always"\n')
    assert load_config(str(conf), {})["journal_fsync"] == "always"
