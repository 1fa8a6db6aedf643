"""The Java that Spark runs on: found (JAVA_HOME, else PATH), its version asked once, and
a clear error saying how to get one when it is missing or too old."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from .errors import PipelineError

# Spark 4.x runs on Java 17 or 21 (the pinned pyspark is tested here on OpenJDK 17).
MIN_JAVA = 17
JAVA_HINT = ("install Java 17 (Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless) "
             "or point JAVA_HOME at one")


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = Path(home) / "bin" / "java"
        return str(exe) if exe.exists() else None
    return shutil.which("java")


@functools.lru_cache(maxsize=8)
def java_version_text(exe: str) -> str:
    """What `exe -version` says ("" when it cannot run): asked once per process."""
    try:
        out = subprocess.run([exe, "-version"], check=False, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stderr + out.stdout


def java_major(exe: str) -> int | None:
    m = re.search(r'version "(\d+)(?:\.(\d+))?', java_version_text(exe))
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def require_java() -> str:
    """The java Spark will use, or PipelineError saying how to get one."""
    exe = java_executable()
    if exe is None:
        where = "JAVA_HOME=%s has no bin/java" % os.environ["JAVA_HOME"] \
            if os.environ.get("JAVA_HOME") else "no `java` on PATH"
        raise PipelineError("Spark needs Java %d or newer: %s; %s" % (MIN_JAVA, where, JAVA_HINT))
    major = java_major(exe)
    if major is None or major < MIN_JAVA:
        raise PipelineError("Spark needs Java %d or newer, %s is %s; %s"
                            % (MIN_JAVA, exe, major or "unknown", JAVA_HINT))
    return exe
