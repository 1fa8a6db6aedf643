"""The processes below a PID, from /proc (Linux): what a test, a bench or the pipeline
started, and what those started in turn (a Spark driver's JVM, a worker's executors), and
their resident memory; and a Ctrl-C held back while something must not be cut in half (a
child's start, an event loop's making)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


def _parents() -> dict[int, list[int]]:
    """Each PID's children, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(ppid, []).append(int(d.name))
    return children


def children(pid: int) -> list[int]:
    """pid's living children."""
    return _parents().get(pid, [])


def descendants(pid: int) -> list[int]:
    """pid's living children, theirs, and so on (parents before their children)."""
    kids = _parents()
    out: list[int] = []
    todo = [pid]
    while todo:
        found = kids.get(todo.pop(), [])
        out.extend(found)
        todo.extend(found)
    return out


def cmdline(pid: int) -> str:
    """pid's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path("/proc/%d/cmdline" % pid).read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def status_kb(key: str, pid: int | str = "self") -> int | None:
    """A process's VmRSS, VmHWM... in KiB, from /proc/PID/status; None once it is gone (or a
    zombie, which has no memory left to tell). Cheap, unlike smaps_rollup, which walks the
    whole memory map holding the lock the process's page faults wait for."""
    try:
        text = Path("/proc/%s/status" % pid).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


@contextmanager
def interrupt_after() -> Iterator[None]:
    """Holds a Ctrl-C (SIGINT) back until the block has run, then raises it as usual.
    Around the start of a child in a session of its own: an interrupt arriving while
    subprocess.Popen waits for the exec would leave the child running with no Popen to end
    it (seen: a firmware build's make and its compiler outliving a Ctrl-C). Around the
    making of an event loop (cli.common.run_async): a half-made one cannot be closed."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    before = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if held:
            if callable(before):
                before(signal.SIGINT, None)
            elif before == signal.SIG_DFL:
                raise KeyboardInterrupt
