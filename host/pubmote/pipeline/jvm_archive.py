"""Spark's start, shortened: a class-data-sharing archive (HotSpot's AppCDS) of the JVM
classes a pipeline run loads, saved once per Java, pyspark and install, and mapped by every
later run instead of loading and verifying some 15,000 classes from Spark's jars again.

It roughly halves the SparkSession's start and the first query over a journal's columns
(the figures: bench/pipeline/PROFILE.md). The first
batch run of `pubmote pipeline` saves the archive when its JVM exits (about 10 s, once);
`make setup` makes it ahead (`python -m pubmote.pipeline.jvm_archive`). The JVM checks the
archive against its own build and class path and ignores one that does not match, so a
stale archive costs the speed, never a wrong result; its name carries a hash of what it
depends on, so an upgrade makes a new one.

Where: the virtualenv's share/pubmote/ (gone with the venv), else ~/.cache/pubmote/;
PUBMOTE_SPARK_ARCHIVE=PATH puts it elsewhere, PUBMOTE_SPARK_ARCHIVE=off turns it off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import Log
from .java import java_version_text, require_java

ENV = "PUBMOTE_SPARK_ARCHIVE"
# the JVM's notes on classes it cannot archive (signed jars, old class files) are not
# the user's business, nor its note when it ignores an archive that no longer matches
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# seconds the JVM may take to write the archive as it exits: about 10 s measured on a quiet
# machine, many times that on 2 cores other work keeps busy (then it is given up, no harm)
SAVE_TIMEOUT_S = 300.0

# (where this process's JVM writes the archive as it exits, where it goes then), while it does
_saving: list[tuple[Path, Path]] = []


def supported(java: str) -> bool:
    """Dynamic archives are HotSpot's (its "Server VM"; not OpenJ9's, which would refuse
    the options and not start)."""
    return "Server VM" in java_version_text(java)


def archive_path(java: str) -> Path | None:
    """Where the archive for this Java, pyspark and install lives; None when turned off
    or the JVM has no dynamic archives."""
    setting = os.environ.get(ENV, "")
    if setting.lower() == "off" or not supported(java):
        return None
    if setting:
        return Path(setting)
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    key = "\n".join((os.path.realpath(java), java_version_text(java), pyspark.__version__,
                     os.path.realpath(_find_spark_home())))
    name = "spark-classes-%s.jsa" % hashlib.sha256(key.encode()).hexdigest()[:16]
    if sys.prefix != sys.base_prefix:  # a virtualenv: the archive goes with it
        return Path(sys.prefix) / "share" / "pubmote" / name
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "pubmote" / name


def java_options(java: str, *, save: bool) -> str:
    """The driver JVM's options for the archive: map it when there is one; else, with
    `save`, write it as the JVM exits (finish() waits for that and moves it into place)."""
    path = archive_path(java)
    if path is None:
        return ""
    if path.exists():
        return "-XX:SharedArchiveFile=%s %s" % (path, QUIET)
    if not save:
        return ""
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name of our own: two first runs at once each write theirs, and the last one in
    # place wins (the same classes)
    tmp = path.with_name(".%s.%d.tmp" % (path.name, os.getpid()))
    _saving[:] = [(tmp, path)]
    return "-XX:ArchiveClassesAtExit=%s %s" % (tmp, QUIET)


def finish(log: Log) -> Path | None:
    """After spark.stop(): when this process's JVM is writing the archive, end the JVM,
    wait for the archive and move it into place; the archive, or None. The JVM ends when
    its stdin closes (pyspark's gateway), so call this last: no Spark afterwards."""
    if not _saving:
        return None
    tmp, final = _saving.pop()
    from pyspark import SparkContext

    gateway = SparkContext._gateway  # noqa: SLF001 - pyspark keeps its JVM gateway only here
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.stdin is None:
        return None
    log("saving Spark's classes for a faster start next time (once)")
    t0 = time.monotonic()
    proc.stdin.close()
    try:
        code = proc.wait(timeout=SAVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log("Spark's JVM took over %.0f s to save its classes; going on without" % SAVE_TIMEOUT_S)
        proc.kill()  # our own JVM: its half-written archive goes with it
        proc.wait()
        code = None
    if code != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        if code is not None:
            log("Spark's JVM saved no class archive (exit status %s); runs start as before"
                % code)
        return None
    os.replace(tmp, final)
    log("saved %s (%.0f MB, %.1f s)" % (final, final.stat().st_size / 1e6,
                                         time.monotonic() - t0))
    return final


def ensure(log: Log = print) -> Path | None:
    """The archive, saved first if there is none: a batch run of `pubmote pipeline` over a
    small synthetic journal in a temporary folder (some 25 s, once). None when turned off
    or unsupported."""
    path = archive_path(require_java())
    if path is None or path.exists():
        return path
    from .synth import records, write_journal

    log("making Spark's class archive %s (once, some 25 s)" % path)
    with tempfile.TemporaryDirectory(prefix="pubmote-classes-") as d:
        write_journal(Path(d) / "journal", records(2000, boards=4, subscribers=2))
        run = subprocess.run(
            [sys.executable, "-m", "pubmote", "pipeline", str(Path(d) / "journal"),
             "--out", str(Path(d) / "tables"), "--report", str(Path(d) / "report")],
            check=False, capture_output=True, text=True, timeout=600)
    if run.returncode != 0 or not path.exists():
        log("could not make the archive (pubmote pipeline exit status %d): %s"
            % (run.returncode, (run.stderr.strip().splitlines() or [""])[-1]))
        return None
    return path


if __name__ == "__main__":  # make setup: python -m pubmote.pipeline.jvm_archive
    # never fails the set-up: without the archive the pipeline starts slower, that is all
    from .errors import PipelineError

    try:
        ensure(lambda line: print("pipeline: " + line))
    except PipelineError as e:
        print("pipeline: no class archive: %s" % e)
