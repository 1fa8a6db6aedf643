"""Replays the fuzz regression corpus of the host-only targets (the bridge's NDN face:
tests/vectors/corpus/ndn_stream/ and ndn_control/) through their harnesses; the codec's
targets are replayed on every runtime by tests/shared/test_corpus.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import host_targets  # noqa: E402

CORPUS = ROOT / "tests" / "vectors" / "corpus"
CASES = [(t, f) for t in sorted(host_targets.TARGETS)
         for f in sorted((CORPUS / t).iterdir()) if f.is_file()]


@pytest.mark.parametrize("target", sorted(host_targets.TARGETS))
def test_corpus_not_empty(target: str) -> None:
    assert any((CORPUS / target).iterdir())


@pytest.mark.parametrize(("target", "path"), CASES, ids=[t + "/" + f.name for t, f in CASES])
def test_replay(target: str, path: Path) -> None:
    host_targets.TARGETS[target](path.read_bytes())  # only DecodeError may escape (caught)
