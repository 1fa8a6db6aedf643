"""The gateway and the faces use the hub only through the API docs/architecture.md lists:
every `hub.<name>` they touch (on a name or an attribute called `hub`) is in that list,
and none of them assigns to the hub's attributes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pubmote.core.auth import BoardAuth
from pubmote.core.hub import Hub

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "host" / "pubmote"
USERS = ("gateway", "faces")


def documented() -> set[str]:
    """The names in docs/architecture.md's list of the hub API the gateway uses."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("The gateway and the faces use the hub only through its API")
    end = text.index("The run-time never", start)
    listed = text[start:end].split("\n\n", 1)[1]  # the list below the opening sentence
    # the hub's names are lower case; a type named in passing (`BoardInfo`) is not one
    return {n for n in re.findall(r"`(\w+)`", listed) if n.islower()}


def hub_uses(source: str) -> list[tuple[str, bool]]:
    """Each `hub.<name>` in source, with whether it is assigned or deleted."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            v = node.value
            owner = v.id if isinstance(v, ast.Name) else v.attr if isinstance(
                v, ast.Attribute) else None
            if owner == "hub":
                out.append((node.attr, not isinstance(node.ctx, ast.Load)))
    return out


def uses() -> dict[str, set[tuple[str, bool]]]:
    """Every hub use in the gateway and the faces, by file."""
    return {str(p.relative_to(ROOT)): set(hub_uses(p.read_text()))
            for d in USERS for p in sorted((PACKAGE / d).rglob("*.py"))}


def test_the_documented_list_is_read() -> None:
    names = documented()
    assert {"attach", "add_listener", "publish", "deliver", "board_infos"} <= names
    assert "BoardInfo" not in names
    # the list names only what the hub has (auth and counters: set in its constructor)
    hub = Hub(gateway="api")
    assert {n for n in names if not hasattr(hub, n)} == set()


def test_the_walk_finds_hub_uses() -> None:
    found = uses()
    assert ("add_listener", False) in found["host/pubmote/faces/sp.py"]
    assert ("attach", False) in found["host/pubmote/gateway/bridge.py"]
    src = "def f(self, hub):\n    hub.x = 1\n    self.hub.y()\n    hub.tracer.z\n"
    assert sorted(hub_uses(src)) == [("tracer", False), ("x", True), ("y", False)]


def test_gateway_and_faces_use_only_the_documented_hub_api() -> None:
    names = documented()
    wrong = sorted("%s: hub.%s" % (f, n) for f, us in uses().items() for n, _ in us
                   if n not in names)
    assert wrong == []


def test_gateway_and_faces_assign_nothing_on_the_hub() -> None:
    wrong = sorted("%s: hub.%s" % (f, n) for f, us in uses().items() for n, st in us if st)
    assert wrong == []


def test_attach_replaces_only_the_parts_it_names() -> None:
    hub = Hub(gateway="api")
    auth = BoardAuth({}, [], allow_anonymous=True)
    tracer = object()
    hub.attach(auth=auth, tracer=tracer)
    assert (hub.auth, hub.tracer, hub.journaling) == (auth, tracer, False)
    hub.attach(tracer=None)
    assert (hub.auth, hub.tracer) == (auth, None)
    hub.set_counters({"mesh_gaps": 3})
    assert hub.counters["mesh_gaps"] == 3 and hub.counters["messages"] == 0
