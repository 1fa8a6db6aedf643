"""The host package's folders are its layers, and stay so: every import in host/pubmote
(module level, inside functions and under TYPE_CHECKING alike) points down the layers,
argparse lives only in the CLI; the codec (shared/pubmote_wire) imports nothing of the
board or the host, the board's node (firmware/pubmote_node) nothing of the host; no
modules of the three import each other in a cycle, and no module in host/, shared/ or
firmware/ outgrows what one reader holds in their head."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host"
PACKAGE = HOST / "pubmote"
# the packages whose imports are walked: the host's, the codec's, the board's node's
PACKAGES = (PACKAGE, ROOT / "shared" / "pubmote_wire", ROOT / "firmware" / "pubmote_node")
# the folders whose every Python file the size limit covers
SIZED = (HOST, ROOT / "shared", ROOT / "firmware")
MAX_LINES = 600

# what each layer may import of pubmote besides itself (docs/architecture.md); the root
# package (`pubmote`, its __version__) is open to all
OPEN = {"files", "procs"}  # files written in one step, private (key) files; /proc: to all
ALLOWED = {
    "files": set(),
    "procs": set(),
    "core": OPEN,
    "faces": {"core", *OPEN},
    "p2p": OPEN,
    "dht": OPEN,
    "boards": {"core", *OPEN},
    "gateway": {"core", "faces", "p2p", "dht", *OPEN},
    "pipeline": OPEN,  # reads the journal's files, nothing else of the bridge
    "cli": {"core", "faces", "p2p", "dht", "boards", "gateway", "pipeline", *OPEN},
}
# third-party names only the CLI may import
CLI_ONLY = {"argparse"}


def module_name(path: Path, base: Path = HOST) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the three packages, by its dotted name."""
    return {module_name(p, pkg.parent): p for pkg in PACKAGES for p in sorted(pkg.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `name` imports: pubmote modules resolved to the module or package
    named, other imports by their top-level name."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pubmote.dht import bencode` imports the module pubmote.dht.bencode
            subs = {mod + "." + a.name for a in node.names} & known
            out.update(subs or {mod})
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def layer(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "pubmote" else None


def test_the_walk_sees_every_layer_and_real_imports() -> None:
    g = graph()
    assert {layer(m) for m in g} - {None} == set(ALLOWED) | {"__main__"}
    assert {m.split(".")[0] for m in g} == {"pubmote", "pubmote_wire", "pubmote_node"}
    # a known edge of each kind: absolute, `from package import module`, lazy in a function,
    # relative (`from . import x`, `from .x import y`)
    assert "pubmote.core.forwarder" in g["pubmote.core.hub"]
    assert "pubmote.dht.bencode" in g["pubmote.dht.krpc"]
    assert "pubmote.gateway.bridge" in g["pubmote.cli.bridge"]
    assert "pubmote_wire.data_core" in g["pubmote_wire.notify_core"]
    assert "pubmote_wire.tlv" in g["pubmote_wire.interest_core"]
    assert "pubmote_node.face" in g["pubmote_node.node"]
    assert "pubmote_wire.interest_core" in g["pubmote_node.face"]


def test_the_codec_and_the_node_stand_alone() -> None:
    # what runs on a board imports nothing of the host, and the codec nothing of the board
    below = {"pubmote_wire": {"pubmote_wire"}, "pubmote_node": {"pubmote_node", "pubmote_wire"}}
    ours = {"pubmote", "pubmote_wire", "pubmote_node"}
    wrong = []
    for mod, deps in graph().items():
        own = mod.split(".")[0]
        if own not in below:
            continue
        for dep in deps:
            top = dep.split(".")[0]
            if top in ours and top not in below[own]:
                wrong.append("%s imports %s" % (mod, dep))
    assert wrong == []


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for mod, deps in graph().items():
        own = layer(mod)
        if own not in ALLOWED:
            continue
        for dep in deps:
            other = layer(dep)
            if other is not None and other != own and other not in ALLOWED[own]:
                wrong.append("%s imports %s" % (mod, dep))
            if dep in CLI_ONLY and own != "cli":
                wrong.append("%s imports %s" % (mod, dep))
    assert wrong == []


def find_cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a module graph: Tarjan's strongly connected components with
    two or more modules (or one that imports itself)."""
    inner = {m: {d for d in deps if d in g} for m, deps in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(inner[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in inner[v]:
                cycles.append(sorted(comp))

    for v in sorted(inner):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_import_cycles() -> None:
    assert find_cycles(graph()) == []


def test_the_cycle_check_finds_cycles(tmp_path: Path) -> None:
    # a lazy import inside a function closes a cycle as surely as a module-level one
    pkg = tmp_path / "pubmote" / "core"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from pubmote.core import b\n")
    (pkg / "b.py").write_text("def f():\n    from pubmote.core.a import x\n")
    known = {"pubmote.core.a", "pubmote.core.b"}
    g = {m: imports_of(m, pkg / (m[-1] + ".py"), known) for m in known}
    assert find_cycles(g) == [["pubmote.core.a", "pubmote.core.b"]]
    assert find_cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}, "v": {"v"}}) == [
        ["v"], ["x", "y", "z"]]
    assert find_cycles({"x": {"y"}, "y": {"z"}, "w": {"x", "z"}, "z": set()}) == []
def test_no_module_over_the_size_limit() -> None:
    files = [p for d in SIZED for p in sorted(d.rglob("*.py"))]
    assert any(p.parent.name == "pubmote_wire" for p in files)
    assert any(p.parent.name == "pubmote_node" for p in files)
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in files}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}


def test_every_host_package_is_in_the_wheel() -> None:
    # pyproject lists the packages (they live under host/, shared/, firmware/): one left out
    # installs without its modules, which only a wheel install outside the checkout shows
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT / "host").parts)
             for p in (ROOT / "host").rglob("__init__.py")}
    assert found - listed == set(), "packages missing from pyproject.toml's list"
