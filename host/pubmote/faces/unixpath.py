"""Unix socket paths a listener binds (SP ipc://, NDN unix://): nothing of the user's is
ever replaced. A path that holds anything but a stale socket is refused; a socket someone
still listens on is "in use"; the socket file is removed at close only while it is still
the one we made."""

from __future__ import annotations

import contextlib
import os
import socket
import stat


class SocketPathError(ValueError):
    """A unix socket path that cannot be bound; the message says why and what to do."""


def check(path: str) -> bool:
    """Whether path can be bound (True: a stale socket is in the way, which prepare
    removes); SocketPathError for a missing folder, a live socket or anything that is
    not a socket."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise SocketPathError("%s: the folder %s does not exist" % (path, folder))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError("%s exists and is not a socket: refusing to replace it "
                              "(choose another path or remove it yourself)" % path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return True  # stale: nobody listens any more
        except OSError:
            pass  # a socket we cannot reach (permissions, a datagram socket): not ours
    raise SocketPathError("%s is in use by another listener (another bridge?)" % path)


def prepare(path: str) -> None:
    """Make path bindable (check), removing a stale socket left by a process that died."""
    if check(path):
        os.unlink(path)


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the socket file just bound, to recognise it at close."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def remove(path: str, ident: tuple[int, int] | None) -> None:
    """Remove the socket file if it is still the one we bound."""
    if ident is not None and identity(path) == ident:
        with contextlib.suppress(OSError):
            os.unlink(path)
