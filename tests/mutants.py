"""Mutants: each test that could once pass whatever the code did must fail against a
deliberately broken build. A mutant replaces one piece of source in a copy of the tree (the
files git tracks or would track, with .venv, node_modules and build linked in), runs the
test that must catch it there, and counts as killed when that test fails (pytest exit 1;
a test that is not found or not collected kills nothing). The working tree is never
touched, so mutants may run beside other tests. tests/host/test_mutants.py runs them.

Usage: .venv/bin/python tests/mutants.py [M1 M2 ...] (none: all; M2, M3 and M6 start
bridges and simulated boards: minutes in all)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]  # the repository
LINKED = (".venv", "node_modules", "build")  # shared, not copied: nothing mutates them
# the packages whose folder has another name (pyproject.toml's package-dir)
PACKAGE_FOLDERS = (("pubmote_firmware", "firmware"), ("pubmote_boards", "boards"))
EXIT_TESTS_FAILED = 1  # pytest's exit status when tests ran and some failed


class Mutant(NamedTuple):
    label: str  # "M<n> what the break is"
    path: str  # the file it breaks, from the repository's root
    old: str  # the source it replaces (found exactly once)
    new: str
    test: str  # the pytest node id that must fail


MUTANTS = [
    Mutant("M1 get_peers answers no peers", "host/pubmote/dht/server.py",
           'r[b"values"] = [krpc.compact_peer(p) for p in peers]', 'r[b"values"] = []',
           "tests/host/dht/test_dht_node.py::test_two_nodes_all_queries"),
    Mutant("M2 bridge ignores board filters", "host/pubmote/core/relay.py",
           "        for b in self._subscribers().match(line):\n",
           "        for b in itertools.chain(self._boards.values(), self._app_subs.values()):\n",
           "tests/host/gateway/test_bridge_e2e.py::test_filter_semantics_end_to_end"),
    Mutant("M3 board deliveries not counted", "host/pubmote/core/delivery.py",
           'b.counters["delivered"] += 1', "pass",
           "tests/host/gateway/test_bridge_e2e.py::test_filter_semantics_end_to_end"),
    Mutant("M4 a bridge flag without help", "host/pubmote/cli/bridge_flags.py",
           'help="record every packet (time, face, direction) as JSON lines in FILE; "\n'
           '                        "read it with `pubmote dissect --trace FILE`")',
           "help=argparse.SUPPRESS)",
           "tests/host/cli/test_bridge_cli.py::test_help_documents_every_flag"),
    Mutant("M5 demo echoes the command twice", "firmware/pubmote_node/demo.py",
           'await node.publish(base + "ack", payload)',
           'await node.publish(base + "ack", payload + payload)',
           "tests/host/gateway/test_bridge_e2e.py"
           "::test_pynng_and_nanocat_publishers_reach_board_subscribers"),
    Mutant("M6 last value handed twice at registration", "host/pubmote/gateway/retained.py",
           "            if self._give(b, topic, item.seq) and self.hub.deliver(b.name, msg):",
           "            if self._give(b, topic, item.seq) and self.hub.deliver(b.name, msg):\n"
           "                self.hub.deliver(b.name, msg)",
           "tests/host/gateway/test_dht_retained.py"
           "::test_late_gateway_gets_last_value_then_pushed_updates"),
    Mutant("M7 verify_interest accepts any signature", "shared/pubmote_wire/interest.py",
           "    i = interest\n    if i.signed_end < 0:\n        return False",
           "    i = interest\n    if i.signed_end < 0:\n        return True",
           "tests/shared/test_corpus.py"),
    Mutant("M8 bencode strings decode to str", "host/pubmote/dht/bencode.py",
           "        return data[start:start + n]",
           "        return data[start:start + n].decode('latin-1')  # type: ignore",
           "tests/host/dht/test_dht_bencode.py::test_encode_and_decode_exact_bytes"),
    Mutant("M9 malformed RPC stream closed, not reset", "host/pubmote/p2p/pubsub/links.py",
           'log.info("gossipsub: closing stream from %s: %s", peer, e)\n'
           "                stream.reset()",
           'log.info("gossipsub: closing stream from %s: %s", peer, e)\n'
           "                stream.close()",
           "tests/host/p2p/test_gossipsub_router.py"
           "::test_malformed_and_oversized_rpcs_close_the_stream"),
]


def copy_tree(dest: Path) -> None:
    """The repository's files as git sees them (committed or not, ignored ones left out)
    into dest, and the shared heavy folders linked."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for raw in names:
        rel = raw.decode()
        src = ROOT / rel
        if not rel or rel.split("/", 1)[0] in LINKED or not src.is_file():
            continue  # deleted in the working tree, or a link git tracks
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    for name in LINKED:
        if (ROOT / name).exists():
            (dest / name).symlink_to((ROOT / name).resolve())


def run(m: Mutant, timeout_s: float = 900, *, mutate: bool = True) -> tuple[bool, str]:
    """(killed, what pytest said) for one mutant, run in a copy of the tree; mutate False
    runs its test on the unbroken copy (a control: it must pass there)."""
    with tempfile.TemporaryDirectory(prefix="pubmote-mutant-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        p = tree / m.path
        src = p.read_text()
        if src.count(m.old) != 1:
            return False, "%s: the mutation point is in %s %d times, not once" % (
                m.label, m.path, src.count(m.old))
        if mutate:
            p.write_text(src.replace(m.old, m.new))
        # the copy's code, not an installed or checked-out one, wherever a test starts Python:
        # pubmote_firmware and pubmote_boards are folders named otherwise (pyproject's
        # package-dir), so they are linked under their package names
        pkgs = tree / ".packages"
        pkgs.mkdir()
        for pkg, folder in PACKAGE_FOLDERS:
            (pkgs / pkg).symlink_to(tree / folder)
        # (which hides the checkout from pubmote.boards.files: its build/ is named instead)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            str(tree / d) for d in ("host", "shared", "firmware", ".packages")),
            PUBMOTE_BUILD_DIR=str(tree / "build"))
        r = subprocess.run([str(tree / ".venv/bin/python"), "-m", "pytest", "-q", "-x",
                            "-p", "no:cacheprovider", "-p", "no:xdist", m.test],
                           cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
    said = [line for line in r.stdout.splitlines()
            if line.startswith("E ") or " failed" in line or " passed" in line
            or "error" in line.lower()]
    if not mutate:
        return r.returncode == 0, "exit %d\n%s" % (r.returncode, "\n".join(said[:6]))
    return r.returncode == EXIT_TESTS_FAILED, "exit %d\n%s" % (r.returncode, "\n".join(said[:6]))


def main(only: list[str]) -> int:
    alive = 0
    for m in MUTANTS:
        if only and m.label.split()[0] not in only:
            continue
        killed, said = run(m)
        alive += not killed
        print("== %s (%s): %s, %s" % (m.label, m.test, "killed" if killed else "ALIVE", said))
        sys.stdout.flush()
    return 1 if alive else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
