"""Private files (keys: the mesh identity, the DHT key, the boards' keys, a TLS key):
refused when anyone but their owner may read or write them, as ssh refuses a private key
that others can read, and created mode 0600 from the first byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pubmote.files.atomic import write_atomic

MAX_KEY_FILE = 64 * 1024  # far above any key file pubmote reads


class KeyFileError(ValueError):
    """A key file that must not be used as it is; the message names it and the fix."""


def check_private(path: str | os.PathLike[str]) -> None:
    """KeyFileError when path is not a regular file or its group/others bits are set."""
    p = Path(path)
    st = p.stat()  # FileNotFoundError and friends: the caller's to word
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError("key file %s is not a regular file" % p)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError("key file %s is readable or writable by others (mode %04o): "
                           "run `chmod 600 %s`" % (p, stat.S_IMODE(st.st_mode), p))


def read_private(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a private file, after check_private; KeyFileError when too large to
    be a key."""
    check_private(path)
    with open(path, "rb") as f:
        data = f.read(MAX_KEY_FILE + 1)
    if len(data) > MAX_KEY_FILE:
        raise KeyFileError("key file %s is too large to be a key" % path)
    return data


def write_private(path: str | os.PathLike[str], data: bytes, *,
                  replace: bool = True) -> None:
    """Write a private file, mode 0600 from the start, in one step (files/atomic.py)."""
    write_atomic(path, data, mode=0o600, replace=replace)
