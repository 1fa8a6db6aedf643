"""The bridge's journal (`pubmote bridge --journal DIR`): one JSON line per relayed message
and egress, for the data pipeline. Records go to a hidden in-progress file that is renamed
into place when it is rotated (by size and by age), so a reader never sees a growing file;
a crash loses at most the record being written, and the torn tail is trimmed on restart.

Write policy (`fsync`): "none" leaves flushing to the OS (fastest; a power cut may lose the
last seconds), "rotate" (default) fsyncs each file before it is renamed into place, "always"
fsyncs every record (slowest; survives a power cut record by record). A process crash loses
at most the record being written under every policy: each record is written with one call.

Faults (docs/guarantees.md): the journal is best effort beside the relay, never in its way.
No call here raises OSError. A record that cannot be written (disk full, out of inodes, a
read-only or vanished folder, too many open files, an I/O error) is held in a bounded
backlog in memory, in order, and written before any newer record once the fault clears;
tick() retries every second. Past the backlog's bound the oldest records are dropped and
counted (`records_lost`). Every failure is counted by errno and the first of each kind in
a fault is logged, as is the recovery. A removed folder is made again and the records of
the file it took are read back from the open file and written again.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

log = logging.getLogger("pubmote.journal")

FSYNC_POLICIES = ("none", "rotate", "always")
PART_PREFIX = ".journal-"
PART_SUFFIX = ".jsonl.part"
BACKLOG_RECORDS = 65536   # records held in memory while the journal cannot write
BACKLOG_BYTES = 16 << 20  # and their bytes: twice a default file, so a salvaged file fits
CHUNK_BYTES = 256 << 10   # the backlog goes out in writes of up to this size
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC

# what each errno means for the journal, in its log line
HINTS = {
    errno.ENOSPC: "the disk is full or out of inodes",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EMFILE: "the bridge has too many open files",
    errno.ENFILE: "the system has too many open files",
    errno.ENOENT: "the folder was removed (it is made again)",
    errno.EIO: "the disk reports an I/O error",
    errno.EACCES: "no permission to write there",
    errno.EPERM: "no permission to write there",
    errno.ENOTDIR: "the path is not a folder",
}


class OS:
    """Every file-system call the journal makes while running, in one place: the faults
    it must survive come from here (tests inject them here, leaving the process alone)."""

    open = staticmethod(os.open)
    write = staticmethod(os.write)
    pread = staticmethod(os.pread)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    fstat = staticmethod(os.fstat)
    stat = staticmethod(os.stat)
    close = staticmethod(os.close)
    replace = staticmethod(os.replace)
    unlink = staticmethod(os.unlink)
    makedirs = staticmethod(os.makedirs)


def _final_name(part: Path) -> Path:
    return part.with_name(part.name[1:-len(".part")])


def errno_name(e: OSError) -> str:
    """ENOSPC, EROFS, ... (OSError without an errno: "OSError")."""
    return errno.errorcode.get(e.errno or 0, "OSError")


def trim_torn_tail(path: Path) -> int:
    """Cut a file back to its last complete, parseable JSON line; return bytes removed."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    # the last complete line may itself be torn inside (a crash mid-write of a short line)
    while keep > 0:
        start = data.rfind(b"\n", 0, keep - 1) + 1
        try:
            json.loads(data[start:keep])
            break
        except ValueError:
            keep = start
    if keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
    return len(data) - keep


class Journal:
    """Appends records to DIR; bounded files (max_bytes, max_age_s), counted records, and a
    bounded backlog (backlog_records, backlog_bytes) for what a fault keeps from the disk."""

    def __init__(self, directory: str | Path, *, max_bytes: int = 8 << 20,
                 max_age_s: float = 60.0, fsync: str = "rotate",
                 backlog_records: int = BACKLOG_RECORDS,
                 backlog_bytes: int = BACKLOG_BYTES) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError("journal fsync policy must be one of %s" % ", ".join(FSYNC_POLICIES))
        if backlog_records < 1 or backlog_bytes < 1:
            raise ValueError("the journal's backlog bounds must be at least 1")
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.fsync = fsync
        self.backlog_records = backlog_records
        self.backlog_bytes = backlog_bytes
        self._fd: int | None = None
        self._part: Path | None = None
        self._opened = 0.0
        self._size = 0          # bytes of whole records in the current file
        self._file_records = 0  # records in the current file
        self._torn = False      # a failed write left bytes past _size that could not be cut
        self._rotate_due = False  # a rotation failed: retried at the next tick
        self._seq = 0
        self._backlog: deque[bytes] = deque()
        self._backlog_size = 0
        self._fault_since: float | None = None  # monotonic start of the current fault
        self._said: set[str] = set()  # what this fault has logged already
        self._wrote = False  # a write or rotation worked since the last failure
        self._lost_at_fault = 0
        self.last_error = ""
        self.errors: dict[str, int] = {}  # failures by errno name
        self.counters = {"records": 0, "files": 0, "recovered_files": 0, "trimmed_bytes": 0,
                         "write_errors": 0, "records_lost": 0, "salvaged": 0}

    def open(self) -> None:
        """Make DIR and put in place what a crash left; a failure is a fault like any
        other (counted, logged, retried), not an exception."""
        try:
            OS.makedirs(self.dir, exist_ok=True)
            self.recover()
        except OSError as e:
            self._fail("make the folder", e)

    def recover(self) -> None:
        """Put the in-progress files a crash left behind into place, torn tails trimmed."""
        for part in sorted(self.dir.glob(PART_PREFIX + "*" + PART_SUFFIX)):
            try:
                self.counters["trimmed_bytes"] += trim_torn_tail(part)
                if part.stat().st_size == 0:
                    part.unlink()
                    continue
                OS.replace(part, _final_name(part))
                self.counters["recovered_files"] += 1
            except OSError as e:
                self._fail("put %s in place" % part.name, e)

    def record(self, rec: dict[str, Any]) -> None:
        """Append one record; never raises for the disk (a fault holds it in memory)."""
        line = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        # behind records held by a fault, a record waits its turn: order is kept
        if self._backlog or not self._append(line, 1):
            self._hold(line)

    def tick(self) -> None:
        """Call now and then (the bridge does, every second): notices a removed folder,
        writes what a fault held back (oldest first), retries a failed rotation, rotates
        a file by age."""
        if self._fd is not None and self._gone():
            self._salvage()
        if self._backlog:
            self._drain()
        if self._fd is not None and (
                self._rotate_due or time.monotonic() - self._opened >= self.max_age_s):
            self._rotate_due = False
            self.rotate()
        if (self._fault_since is not None and self._wrote and not self._backlog
                and not self._rotate_due):
            self._recovered()  # writing again, proven by a write that worked

    def rotate(self) -> None:
        """Put the current file in place (readers see it from now on). A step that fails
        leaves it current and open, to be retried at the next tick."""
        fd, part = self._fd, self._part
        if fd is None or part is None:
            return
        if self._gone():
            self._salvage()
            return
        op = "cut the torn tail"
        try:
            if self._torn:
                OS.ftruncate(fd, self._size)
                self._torn = False
            op = "fsync"
            if self.fsync != "none" and self._size:
                OS.fsync(fd)
            if self._size:
                op = "rename"
                OS.replace(part, _final_name(part))
            else:
                op = "remove"
                OS.unlink(part)
        except OSError as e:
            self._fail(op, e)
            self._rotate_due = True
            return
        self._fd = self._part = None
        self._wrote = True
        self._close_fd(fd)
        if self._size:
            self.counters["files"] += 1

    def close(self) -> None:
        """Write what is held, if the disk lets it now, and put the file in place. What
        still cannot be written is counted lost and said; a file that cannot be renamed
        stays hidden and is put in place at the next start (recover)."""
        if self._fd is not None and self._gone():
            self._salvage()
        if self._backlog:
            self._drain()
        self._rotate_due = False
        self.rotate()
        if self._backlog:
            n = len(self._backlog)
            self.counters["records_lost"] += n
            self._backlog.clear()
            self._backlog_size = 0
            log.error("journal %s: %d records could not be written before the bridge "
                      "stopped (%s); counted in records_lost", self.dir, n, self.last_error)
        if self._fd is not None:
            log.warning("journal %s: %s stays in progress (%s); it is put in place at the "
                        "next start", self.dir, self._part, self.last_error)
            self._close_fd(self._fd)
            self._fd = self._part = None

    def status(self) -> dict[str, Any]:
        """What the journal has done and holds: for the status line, the view and tests."""
        return {"dir": str(self.dir), "records": self.counters["records"],
                "files": self.counters["files"], "backlog_records": len(self._backlog),
                "backlog_bytes": self._backlog_size,
                "records_lost": self.counters["records_lost"],
                "write_errors": self.counters["write_errors"], "errors": dict(self.errors),
                "last_error": self.last_error, "failing": self._fault_since is not None}

    def status_line(self) -> str:
        """status() as one line of text."""
        s = self.status()
        text = "journal %s: %d records in %d files, %d held in memory, %d lost, %d write " \
               "errors" % (s["dir"], s["records"], s["files"], s["backlog_records"],
                           s["records_lost"], s["write_errors"])
        if s["errors"]:
            text += " (%s)" % ", ".join("%s %d" % kv for kv in sorted(s["errors"].items()))
        if s["failing"]:
            text += ", FAILING: %s" % s["last_error"]
        return text

    # -- writing

    def _append(self, data: bytes, n: int) -> bool:
        """Write n whole records to the current file (opened if need be); False, with
        nothing of them left in the file, if the disk refused."""
        op = "open a file"
        try:
            if self._fd is None:
                self._start()
            assert self._fd is not None
            if self._torn:  # never write after a torn record: cut it first
                op = "cut the torn tail"
                OS.ftruncate(self._fd, self._size)
                self._torn = False
            op = "write"
            view = memoryview(data)
            while view:  # a short write (disk full) is followed by a call that says why
                k = OS.write(self._fd, view)
                if k <= 0:
                    raise OSError(errno.EIO, "write wrote nothing")
                view = view[k:]
            if self.fsync == "always":
                op = "fsync"
                OS.fsync(self._fd)
        except OSError as e:
            self._fail(op, e)
            self._cut_back()
            return False
        self._size += len(data)
        self._file_records += n
        self.counters["records"] += n
        self._wrote = True
        if self._size >= self.max_bytes and not self._rotate_due:
            self.rotate()
        return True

    def _start(self) -> None:
        self._seq += 1
        name = "%s%d-%04d%s" % (PART_PREFIX, int(time.time() * 1000), self._seq, PART_SUFFIX)
        part = self.dir / name
        try:
            fd = OS.open(part, _OPEN_FLAGS, 0o644)
        except FileNotFoundError as e:  # the folder was removed: a fault, mended at once
            self._fail("open a file", e)
            OS.makedirs(self.dir, exist_ok=True)
            fd = OS.open(part, _OPEN_FLAGS, 0o644)
        self._fd, self._part = fd, part
        self._opened = time.monotonic()
        self._size = self._file_records = 0
        self._torn = False

    def _cut_back(self) -> None:
        # a failed write may have left part of a record: cut the file back to whole records
        if self._fd is None:
            return
        try:
            OS.ftruncate(self._fd, self._size)
        except OSError:
            self._torn = True  # cut before the next write or the rotation

    def _close_fd(self, fd: int) -> None:
        try:
            OS.close(fd)
        except OSError as e:  # Linux frees the descriptor anyway
            self._fail("close", e)

    def _hold(self, line: bytes) -> None:
        self._backlog.append(line)
        self._backlog_size += len(line)
        self._bound_backlog()

    def _bound_backlog(self) -> None:
        q = self._backlog
        dropped = 0
        while q and (len(q) > self.backlog_records or self._backlog_size > self.backlog_bytes):
            self._backlog_size -= len(q.popleft())
            dropped += 1
        if dropped:
            self.counters["records_lost"] += dropped
            if "full" not in self._said:
                self._said.add("full")
                log.error("journal %s: the records held in memory reached their bound (%d "
                          "records, %d bytes): the oldest are dropped, counted in "
                          "records_lost", self.dir, self.backlog_records, self.backlog_bytes)

    def _drain(self) -> None:
        q = self._backlog
        while q:
            size = n = 0
            for line in q:  # whole records, up to CHUNK_BYTES (at least one)
                if n and size + len(line) > CHUNK_BYTES:
                    break
                size += len(line)
                n += 1
            chunk = [q[i] for i in range(n)]
            if not self._append(b"".join(chunk), n):
                return
            for _ in range(n):
                q.popleft()
            self._backlog_size -= size

    # -- a removed folder

    def _gone(self) -> bool:
        """Whether the open file is no longer at its path (its folder removed or moved)."""
        if self._fd is None or self._part is None:
            return False
        try:
            st = OS.fstat(self._fd)
            if st.st_nlink == 0:
                return True
            at = OS.stat(self._part)
        except FileNotFoundError:
            return True
        except OSError:
            return False  # cannot tell: carry on, the next tick looks again
        return (at.st_dev, at.st_ino) != (st.st_dev, st.st_ino)

    def _salvage(self) -> None:
        """The open file was taken away: read its records back (the open descriptor still
        has them) to be written again, ahead of everything held since."""
        fd, n, size = self._fd, self._file_records, self._size
        assert fd is not None
        self._fd = self._part = None
        self._rotate_due = False
        self.counters["records"] -= n
        data = b""
        try:
            while len(data) < size:
                got = OS.pread(fd, size - len(data), len(data))
                if not got:
                    break
                data += got
        except OSError as e:
            self._fail("read back", e)
        self._close_fd(fd)
        lines = [x + b"\n" for x in data[:data.rfind(b"\n") + 1].split(b"\n")[:-1]]
        if len(lines) < n:
            self.counters["records_lost"] += n - len(lines)
        self._backlog.extendleft(reversed(lines))
        self._backlog_size += sum(len(x) for x in lines)
        self.counters["salvaged"] += len(lines)
        self._fail("keep the file", FileNotFoundError(errno.ENOENT, "the folder or the file "
                                                       "was removed"))
        self._bound_backlog()
        try:
            OS.makedirs(self.dir, exist_ok=True)
        except OSError as e:
            self._fail("make the folder", e)

    # -- fault bookkeeping

    def _fail(self, op: str, e: OSError) -> None:
        kind = errno_name(e)
        self._wrote = False
        self.counters["write_errors"] += 1
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.last_error = "cannot %s: %s (%s)" % (op, e.strerror or e, kind)
        if self._fault_since is None:
            self._fault_since = time.monotonic()
            self._said = set()
            self._lost_at_fault = self.counters["records_lost"]
        if kind not in self._said:  # each kind once per fault: said, not flooded
            self._said.add(kind)
            hint = HINTS.get(e.errno or 0, "")
            log.error("journal %s: %s%s; the relay goes on, records wait in memory (up to %d "
                      "records, %d bytes) and are written when it works again",
                      self.dir, self.last_error, " - " + hint if hint else "", self.backlog_records,
                      self.backlog_bytes)

    def _recovered(self) -> None:
        assert self._fault_since is not None
        lost = self.counters["records_lost"] - self._lost_at_fault
        log.warning("journal %s: writing again after %.1f s; every record held was written%s",
                    self.dir, time.monotonic() - self._fault_since,
                    "" if not lost else " except %d lost (see records_lost)" % lost)
        self._fault_since = None
        self._said = set()
