"""Spark's class archive (pipeline/jvm_archive.py): the first batch run saves it, a later
session's JVM maps it, the settings that turn it off or move it are honoured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pubmote.pipeline import jvm_archive
from pubmote.pipeline.java import require_java
from pubmote.pipeline.synth import records, write_journal

PUBMOTE = str(Path(sys.executable).parent / "pubmote")

# a session started with the archive at argv[1]: prints whether its JVM maps that file
MAPS = """
import sys
from pathlib import Path
from pyspark import SparkContext
from pubmote.pipeline.session import spark_session
spark = spark_session("local[1]")
spark.range(10).count()
pid = SparkContext._gateway.proc.pid  # spark-class execs the JVM: this is its pid
print("mapped" if sys.argv[1] in Path("/proc/%d/maps" % pid).read_text() else "not mapped")
spark.stop()
"""


def test_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = require_java()
    monkeypatch.setenv(jvm_archive.ENV, "off")
    assert jvm_archive.archive_path(java) is None
    assert jvm_archive.java_options(java, save=True) == ""
    where = tmp_path / "sub" / "a.jsa"
    monkeypatch.setenv(jvm_archive.ENV, str(where))
    assert jvm_archive.archive_path(java) == where
    assert jvm_archive.java_options(java, save=False) == ""  # none yet, none made
    opts = jvm_archive.java_options(java, save=True)  # none yet: this JVM would save it
    assert "-XX:ArchiveClassesAtExit=%s/.a.jsa.%d.tmp" % (where.parent, os.getpid()) in opts
    jvm_archive._saving.clear()  # no JVM started: nothing to finish
    where.write_bytes(b"x")
    assert jvm_archive.java_options(java, save=True).startswith(
        "-XX:SharedArchiveFile=%s " % where)
    monkeypatch.delenv(jvm_archive.ENV)
    default = jvm_archive.archive_path(java)
    assert default is not None and default.name.startswith("spark-classes-")
    assert default.parent == Path(sys.prefix) / "share" / "pubmote"  # the tests' venv


@pytest.mark.timeout(900)  # two JVMs of their own, on 2 cores that other tests keep busy
def test_first_batch_run_saves_it_and_the_next_session_maps_it(tmp_path: Path) -> None:
    """The CLI's batch run with a report (its tables and page checked here too), the first
    with no archive: it saves one; a later session's JVM maps it (that a session with an
    archive saves none again: test_settings)."""
    archive = tmp_path / "classes.jsa"
    env = dict(os.environ, **{jvm_archive.ENV: str(archive)})
    write_journal(tmp_path / "j", records(300, seed=2))
    run = subprocess.run([PUBMOTE, "pipeline", str(tmp_path / "j"), "--out",
                          str(tmp_path / "t"), "--report", str(tmp_path / "r"),
                          "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=1"],
                         env=env, capture_output=True, text=True, timeout=580)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "wrote windows:" in run.stderr and (tmp_path / "r" / "index.html").exists()
    assert list((tmp_path / "t" / "windows").glob("*.parquet"))
    assert "saved %s" % archive in run.stderr
    assert archive.stat().st_size > 10_000_000  # Spark's classes, not an empty file
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    maps = subprocess.run([sys.executable, "-c", MAPS, str(archive)], env=env,
                          capture_output=True, text=True, timeout=300)
    archive.unlink()  # 180 MB: not kept with pytest's last runs' folders
    assert maps.stdout.split()[-1:] == ["mapped"], maps.stderr[-2000:]
