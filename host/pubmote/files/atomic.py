"""Writing a file so that nobody ever sees half of it and nothing is left behind on
failure: the bytes go to a temporary name beside the target (same folder, so the rename
cannot cross filesystems), are synced, then renamed over the target in one step."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                 replace: bool = True) -> None:
    """Write data to path in one step. With replace=False an existing path is left alone
    and FileExistsError raised (a key made meanwhile by another process wins).

    Raises OSError (the target's folder missing or unwritable, a full disk...); the
    temporary file is gone then.
    """
    p = Path(path)
    tmp = p.with_name(".%s.%d.tmp" % (p.name, os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, p)
        else:
            os.link(tmp, p)  # fails with FileExistsError rather than overwrite
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
