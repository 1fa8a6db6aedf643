"""Where a journal's files and its typed columns are: the names both the compaction
(columns.py) and the batch run's backlog (backlog.py) use."""

from __future__ import annotations

from pathlib import Path

from .errors import PipelineError

JOURNAL_GLOB = "journal-*.jsonl"
COLUMNS_GLOB = "journal-*.parquet"


def columns_dir(journal: str | Path, reading_key: str | None = None) -> Path:
    """Where the journal's columns go: one folder per reading rule (--reading-key)."""
    name = ".columns" if reading_key is None else ".columns-key-" + reading_key.encode().hex()
    return Path(journal) / name


def make_columns_dir(journal: str | Path, reading_key: str | None = None) -> Path:
    out = columns_dir(journal, reading_key)
    try:
        out.mkdir(exist_ok=True)
    except OSError as e:
        raise PipelineError("cannot write the journal's columns in %s (%s): the pipeline "
                            "keeps them beside the journal, give it write access" % (out, e)) \
            from e
    return out
