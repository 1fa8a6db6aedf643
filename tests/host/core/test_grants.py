"""Publish grants of keyed boards (core/auth.py): what a board's key lets it publish on,
the keys file's "grants" table checked as it loads, and kept when deploy adds a key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pubmote.core.auth import BoardAuth, load_grants, load_keys, save_board_key
from pubmote_wire import name

KEY = "11" * 32


def _file(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "keys.json"
    p.write_text(json.dumps(doc))
    p.chmod(0o600)
    return p


def _auth(grants: dict[str, list[str]]) -> BoardAuth:
    return BoardAuth({"sim1": b"k" * 32, "gh": b"g" * 32}, [],
                     grants={b: [name.from_uri(p) for p in ps] for b, ps in grants.items()},
                     allow_anonymous=True)


def test_own_topics_are_those_with_the_name_as_a_component() -> None:
    auth = _auth({})
    table = {"/pubmote/demo/sim1/temperature": True, "/sim1": True, "/a/sim1": True,
             "/pubmote/demo/sim2/temperature": False, "/pubmote/demo/sim10/t": False,
             "/pubmote/demo/xsim1/t": False, "/site/valve": False}
    for topic, ok in table.items():
        assert auth.granted("sim1", name.from_uri(topic)) is ok, topic


def test_grants_are_component_prefixes() -> None:
    auth = _auth({"gh": ["/site/alerts", "/greenhouse"]})
    table = {"/site/alerts": True, "/site/alerts/fire": True, "/site/alertsx": False,
             "/site": False, "/greenhouse/vent/1": True, "/gh/t": True, "/other": False}
    for topic, ok in table.items():
        assert auth.granted("gh", name.from_uri(topic)) is ok, topic
    # grants are per board
    assert not auth.granted("sim1", name.from_uri("/site/alerts/fire"))


def test_boards_without_a_key_are_not_confined() -> None:
    assert _auth({}).granted("anon", name.from_uri("/anything/at/all"))


def test_grants_table_checked_as_it_loads(tmp_path: Path) -> None:
    bad = {"not a table": ["/x"], "not a list": {"b": "/x"}, "not a name": {"b": ["x"]},
           "a number": {"b": [7]}, "no key for the board": {"nokey": ["/x"]}}
    for what, grants in bad.items():
        p = _file(tmp_path, {"boards": {"b": KEY}, "grants": grants})
        for load in (load_keys, load_grants):
            with pytest.raises(ValueError) as e:
                load(p)
            assert str(p) in str(e.value) and "grants" in str(e.value), what
    p = _file(tmp_path, {"boards": {"b": KEY}, "grants": {"b": ["/site/alerts"]}})
    assert load_grants(p) == {"b": [name.from_uri("/site/alerts")]}
    assert load_grants(_file(tmp_path, {"boards": {"b": KEY}})) == {}


def test_save_board_key_keeps_the_grants(tmp_path: Path) -> None:
    p = _file(tmp_path, {"boards": {"b": KEY}, "grants": {"b": ["/site"]}})
    save_board_key(p, "c", b"\x02" * 32)
    assert load_grants(p) == {"b": [name.from_uri("/site")]}
    assert set(load_keys(p)) == {"b", "c"}
