"""What is wrong with a path a command was given, found before any work starts. Each
function returns None when the path can be used as asked, else the reason in a few words
(the caller names the option and the path). Nothing is left behind: whether a folder
takes new files is tried with a temporary file that is removed at once, since permission
bits do not tell (root, read-only mounts, /proc)."""

from __future__ import annotations

import codecs
import contextlib
import os
import stat
import tempfile

TEXT_PROBE = 1 << 20  # bytes read to tell text from binary: configs and sources are smaller


def _missing(path: str) -> str:
    """Why a path that does not exist cannot even be made: its folder is missing or is a
    file; else plain "no such file"."""
    folder = os.path.dirname(os.path.abspath(path))
    blocker = _file_in_the_way(folder)
    if blocker is not None:
        return "%s is a file, not a folder" % blocker
    if not os.path.isdir(folder):
        return "no such file (its folder %s does not exist)" % folder
    return "no such file"


def _file_in_the_way(folder: str) -> str | None:
    """The first ancestor of folder (or folder itself) that exists and is not a folder."""
    p = os.path.abspath(folder)
    while True:
        if os.path.lexists(p):
            return None if os.path.isdir(p) else p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def _existing_ancestor(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        p = os.path.dirname(p)
    return p


def takes_new_files(folder: str) -> str | None:
    """None when a file can be made in folder (tried, then removed), else why not."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".pubmote-probe-")
    except OSError as e:
        return "nothing can be written in %s (%s)" % (folder, e.strerror or e)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def readable_file(path: str, *, text: bool = False) -> str | None:
    """A file to read: it exists, is a regular file, can be opened; with text, it is
    UTF-8 text (no NUL bytes)."""
    if not path:
        return "empty: give a file"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _missing(path)
    except NotADirectoryError:
        return "%s is a file, not a folder" % _file_in_the_way(os.path.dirname(path))
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return "a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return "cannot be read (%s)" % (e.strerror or e)
    with os.fdopen(fd, "rb") as f:
        head = f.read(TEXT_PROBE) if text else b""
    if text:
        return text_problem(head)
    return None


def text_problem(data: bytes) -> str | None:
    """Why data (a file's first bytes) is not UTF-8 text, or None."""
    if b"\0" in data:
        return "a binary file, not text"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError as e:
        return "not UTF-8 text (byte 0x%02x at offset %d)" % (data[e.start], e.start)
    return None


def writable_file(path: str) -> str | None:
    """A file to write: made in an existing folder, or an existing regular file that can
    be written (it is not opened for writing here: nothing is truncated)."""
    if not path:
        return "empty: give a file"
    if path.endswith(os.sep):
        return "names a folder, not a file"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        why = _missing(path)
        if why != "no such file":
            return why
        return takes_new_files(os.path.dirname(os.path.abspath(path)))
    except NotADirectoryError:
        return "%s is a file, not a folder" % _file_in_the_way(os.path.dirname(path))
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return "a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as e:
        return "cannot be written (%s)" % (e.strerror or e)
    return None


def readable_folder(path: str) -> str | None:
    """A folder to read: it exists, is a folder, and can be listed."""
    if not path:
        return "empty: give a folder"
    if not os.path.exists(path):
        blocker = _file_in_the_way(os.path.dirname(os.path.abspath(path)))
        if blocker is not None:
            return "%s is a file, not a folder" % blocker
        return "no such folder"
    if not os.path.isdir(path):
        return "a file, not a folder"
    try:
        os.listdir(path)
    except OSError as e:
        return "cannot be read (%s)" % (e.strerror or e)
    return None


def writable_folder(path: str) -> str | None:
    """A folder to write in: an existing folder that takes new files, or a missing one
    that can be made (its nearest existing parent is a folder that takes new files)."""
    if not path:
        return "empty: give a folder"
    blocker = _file_in_the_way(path)
    if blocker is not None:
        if blocker == os.path.abspath(path):
            return "a file, not a folder"
        return "%s is a file, not a folder" % blocker
    return takes_new_files(_existing_ancestor(path))
