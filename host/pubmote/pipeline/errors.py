"""What the pipeline's modules share: the error a user can fix, and where they log."""

from __future__ import annotations

from collections.abc import Callable

# where batch, stream and report say what they do (print, or a test's list.append)
Log = Callable[[str], None]


class PipelineError(Exception):
    """A problem the user can fix (missing Java, bad folder, bad option): one clear line."""
