"""The board config's schema (boards/schema.py): every key the firmware reads is checked on
the host, through `pubmote deploy --set` and the bridge's --sim-app-config, before a board
would die at boot on it; board names that cannot be topic levels or addresses refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pubmote.boards.schema import KEYS, check_value
from pubmote.cli.main import main

FIRMWARE = Path(__file__).resolve().parents[3] / "firmware"


def _bad_values(kind: str, low: int, high: int) -> list[Any]:
    out: list[Any] = [None, [1], {"a": 1}]
    if kind == "int":
        out += ["abc", "12", 1.5, True, low - 1, high + 1]
    elif kind == "bool":
        out += [1, 0, "yes", "true"]
    elif kind == "flag":
        out += [2, -1, 0.5, "yes", "true"]
    elif kind in ("str", "uri", "module", "hex"):
        out += [5, 2.5, False]
    if kind == "str":
        out += ["x" * (high + 1)] + ([""] if low else [])
    if kind == "hex":
        out += ["zz" * low, "00" * (low - 1), "00" * (high + 1)]
    if kind == "uri":
        out += ["no-slash", "/" + "x" * high]
    if kind == "module":
        out += ["1abc", "a b", "a/b", "a..b"]
    return out


def _good_value(kind: str, low: int, high: int) -> Any:
    return {"int": low, "bool": True, "flag": 1, "str": "x" * max(low, 1), "hex": "ab" * low,
            "uri": "/pubmote/node/b1", "module": "myapp.main"}[kind]


def test_every_key_the_firmware_reads_is_in_the_schema() -> None:
    # the keys firmware/ reads from its config, by the code: none escapes the check
    import re

    read = set()
    for p in FIRMWARE.rglob("*.py"):
        read |= set(re.findall(r'(?:config|cfg)(?:\.get\(|\[)"([a-z_0-9]+)"', p.read_text()))
    assert read - set(KEYS) - {"name", "link"} == set()


@pytest.mark.parametrize("key", sorted(KEYS))
def test_wrong_values_refused_naming_the_key(key: str) -> None:
    kind, low, high, _ = KEYS[key]
    check_value(key, _good_value(kind, low, high))
    for v in _bad_values(kind, low, high):
        with pytest.raises(ValueError) as e:
            check_value(key, v)
        assert ("%s=" % key) in str(e.value), (key, v, e.value)


def test_names() -> None:
    for good in ("sim1", "greenhouse-1", "b_2.x", "ünï"):
        check_value("name", good)
    for bad in ("", "a/b", "a b", "*", "a|b", "a%b", "tab\there", "x" * 65, 'q"', 7):
        with pytest.raises(ValueError):
            check_value("name", bad)


def _fine_as_json(key: str, text: str) -> bool:
    try:
        check_value(key, json.loads(text))
    except ValueError:  # not JSON, or JSON of the wrong kind
        return False
    return True


def _main(argv: list[str]) -> int:
    """main's exit status: returned, or a usage error's SystemExit."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def _deploy(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = _main(["deploy", "--board", "unix", "--port", "/nonexistent/repl", *args])
    return code, capsys.readouterr().err


def test_deploy_refuses_before_touching_the_board(capsys: pytest.CaptureFixture[str]) -> None:
    n = 0
    for key, (kind, low, high, _) in sorted(KEYS.items()):
        for v in _bad_values(kind, low, high):
            if v is None:
                continue  # --set key=null is JSON null: the same as leaving it out
            text = v if isinstance(v, str) else json.dumps(v)
            if isinstance(v, str) and _fine_as_json(key, v):
                continue  # --set takes JSON first: "12" is the number 12, "true" true
            code, err = _deploy(capsys, "--set", "%s=%s" % (key, text))
            assert code == 2 and err.count("\n") == 1 and key in err, (key, v, code, err)
            assert "no such port" not in err  # refused before the board was looked for
            n += 1
    assert n > 100
    for bad in ("a/b", "a b", "*", ""):
        code, err = _deploy(capsys, "--name", bad)
        assert code == 2 and "--name" in err and err.count("\n") == 1, (bad, err)


def test_bridge_checks_sim_app_config(capsys: pytest.CaptureFixture[str]) -> None:
    code = _main(["bridge", "--sim-boards", "1", "--sp-pub", "none", "--sp-sub", "none",
                  "--sim-app-config", "{\"period_ms\": \"abc\"}"])
    err = capsys.readouterr().err
    assert code == 2 and "--sim-app-config" in err and "period_ms" in err
