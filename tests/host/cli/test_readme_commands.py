"""The README cannot drift from the CLI: every `pubmote ...` command line it shows parses
with the real parser (each subcommand and flag exists, with its values), every flag it
names inline exists, every bridge config key it names exists, the command it says `make
run` starts is the Makefile's, the Debian packages it lists are the Makefile's, and the
board states it quotes are the ones the live view shows."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubmote.cli.main import build_parser
from pubmote.gateway.config import ALIASES, KEYS

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
PUBMOTE = r"(?:\.venv/bin/)?pubmote"


def shown_commands() -> Iterator[tuple[int, str]]:
    """(line number, command) of every `pubmote` command in the README's code blocks,
    continuation lines joined, comments and a trailing & dropped."""
    fenced = shell = False
    lines = README.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
            shell = fenced and line.strip() in ("```", "```sh", "```bash")
            i += 1
            continue
        start = i
        text = line.strip()
        if shell and re.match(PUBMOTE + r" ", text):
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            yield start + 1, text
        i += 1


def inline_commands() -> Iterator[tuple[int, str]]:
    for n, line in enumerate(README.splitlines(), 1):
        for m in re.finditer(r"`(%s [^`]+)`" % PUBMOTE, line):
            yield n, m[1]


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    words = [w.strip("[]") for w in words if w not in ("&", "|")]
    return [w for w in words if w][1:]  # without `pubmote`


def _untyped_parser() -> argparse.ArgumentParser:
    """The real parser with its values' kinds left out: the README's paths and keys are
    examples, not files on this machine."""
    parser = build_parser()
    todo = [parser]
    while todo:
        p = todo.pop()
        for a in p._actions:
            a.type = None
            if isinstance(a, argparse._SubParsersAction):
                todo.extend(a.choices.values())
    return parser


def _leaf(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the (sub)command argv names, and the words after it."""
    p: argparse.ArgumentParser = build_parser()
    while argv:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or argv[0] not in subs[0].choices:
            break
        p, argv = subs[0].choices[argv[0]], argv[1:]
    return p, argv


def test_the_readme_shows_commands() -> None:
    assert len(list(shown_commands())) >= 30 and len(list(inline_commands())) >= 20


@pytest.mark.parametrize(("line", "command"), list(shown_commands()),
                         ids=["README:%d" % n for n, _ in shown_commands()])
def test_each_shown_command_parses(line: int, command: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = _untyped_parser().parse_args(_argv(command))
        except SystemExit:
            raise AssertionError("README line %d: %s\n%s" % (line, command, err.getvalue())) \
                from None
    assert getattr(args, "run", None) is not None, command


def test_each_inline_flag_exists() -> None:
    wrong = []
    for line, command in inline_commands():
        parser, rest = _leaf(_argv(command))
        flags = {o for a in parser._actions for o in a.option_strings}
        for word in rest:
            flag = word.split("=", 1)[0]
            if flag.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", flag) and \
                    flag not in flags:
                wrong.append("README:%d: %s: no %s" % (line, command, flag))
    assert wrong == []


def _sentences() -> Iterator[str]:
    for para in re.split(r"\n\s*\n", README):
        yield from re.split(r"(?<=\.)\s+(?=[A-Z`])", para.replace("\n", " "))


# what may stand between "TOML" and the keys it lists, and between them (parentheses aside)
_LISTING = re.compile(r"[\s,:;()]*(?:(?:keys?|and|or|the|same|configs?|takes?)[\s,:;()]*)*")


def toml_keys_named() -> set[str]:
    """Config keys the README names: in ```toml blocks, as `key = value`, and listed
    after the word TOML (`TOML keys `a` (default 1) and `b``)."""
    named = set()
    for block in re.findall(r"```toml\n(.*?)```", README, re.S):
        named |= {m[1] for m in re.finditer(r"^([a-z_]+)\s*=", block, re.M)}
    named |= set(re.findall(r"`([a-z][a-z0-9_]*) = [^`]+`", README))
    for s in _sentences():
        at = s.find("TOML")
        while at >= 0:
            end = at + len("TOML")
            prev = 0
            rest = s[end:]
            for m in re.finditer(r"`([^`]+)`", rest):
                gap = re.sub(r"\([^)]*\)?", "", rest[prev:m.start()])
                if not _LISTING.fullmatch(gap):
                    break
                if re.fullmatch(r"[a-z][a-z0-9_]*", m[1]):
                    named.add(m[1])
                prev = m.end()
            at = s.find("TOML", at + 1)
    return named


def test_each_config_key_named_exists() -> None:
    named = toml_keys_named()
    assert named, "the README names no config key"
    assert sorted(k for k in named if k not in KEYS and k not in ALIASES) == []
    assert sorted(k for k in named if k in ALIASES) == [], "name them by their flag's name"


def _make_var(name: str) -> str:
    m = re.search(r"^%s\s*[:?]?=\s*(.*)$" % name, MAKEFILE, re.M)
    assert m, name
    return m[1].strip()


def test_make_run_starts_what_the_readme_says() -> None:
    run = _make_var("RUN_BRIDGE")
    for var in ("SIM_KIND", "SP_PUB", "SP_SUB"):
        run = run.replace("$(%s)" % var, _make_var(var))
    words = shlex.split(run)
    words[0] = Path(words[0]).name  # $(BIN)/pubmote
    said = re.search(r"`make run` starts `(pubmote bridge[^`]*)`", README.replace("\n", " "))
    assert said, "the README does not say what make run starts"
    assert shlex.split(said[1]) == words


def test_the_debian_packages_are_the_makefiles() -> None:
    packages = " ".join(re.findall(r"^DEB_PACKAGES\s*\+?:?=\s*(.*)$", MAKEFILE, re.M)).split()
    packages.append(_make_var("JAVA_PACKAGE"))
    para = next(p for p in re.split(r"\n\s*\n", README) if "Debian packages" in p)
    listed = set(re.findall(r"[a-z0-9][a-z0-9.+-]+", " ".join(re.findall(r"`([^`]+)`", para))))
    assert sorted(set(packages) - listed) == []


def test_the_board_states_quoted_are_the_views() -> None:
    view = (ROOT / "host" / "pubmote" / "gateway" / "view.py").read_text()
    para = next(p for p in re.split(r"\n\s*\n", README) if "In the live view" in p)
    states = re.findall(r"`((?:up|down|crashed)[^`]*)`", para)
    assert "up (not registered)" in states and any(s.startswith("crashed: ") for s in states)
    for s in states:
        word = s.split(" ", 1)[0].rstrip(":")
        assert '"%s"' % word in view or '"%s: ' % word in view or word == "crashed", s
        if "(" in s and "..." not in s:
            assert s[s.index("("):].rstrip(")") + ")" in view or "not registered" in s, s
    assert "down (not registered)" not in README
