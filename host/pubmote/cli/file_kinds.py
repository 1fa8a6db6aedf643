"""The kinds of files and folders options name (cli/kinds.py for the others): a file to
read (text, a certificate, a key), a file or folder to write in, a private key file that
is made when missing. Each check finds what is wrong before any work starts and writes
nothing (files/paths.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pubmote.cli.kinds import KindError, nonempty
from pubmote.files import paths


def _path(why: str | None, value: str) -> str:
    if why is not None:
        raise KindError(why)
    return value


def file_in(value: Any) -> str:
    v = nonempty(value)
    return _path(paths.readable_file(v), v)


def text_in(value: Any) -> str:
    v = nonempty(value)
    return _path(paths.readable_file(v, text=True), v)


def python_in(value: Any) -> str:
    """A .py module of the user's: UTF-8 Python that compiles."""
    v = text_in(value)
    if not v.endswith(".py"):
        raise KindError("not a .py file")
    with open(v, encoding="utf-8") as f:
        source = f.read()
    try:
        compile(source, v, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise KindError("not Python: %s (line %s)" % (e.msg, e.lineno)) from None
    return v


def file_out(value: Any) -> str:
    v = nonempty(value)
    return _path(paths.writable_file(v), v)


def trace_out(value: Any) -> str:
    """A trace file to append to: new, empty, or one that holds a trace already."""
    v = file_out(value)
    if os.path.isfile(v) and os.path.getsize(v):
        with open(v, "rb") as f:
            head = f.read(4096)
        if paths.text_problem(head) is not None or not head.lstrip().startswith(b"{"):
            raise KindError("exists and is not a packet trace: refusing to append to it "
                            "(give a new file)")
    return v


def folder_in(value: Any) -> str:
    v = nonempty(value)
    return _path(paths.readable_folder(v), v)


def cert_or_none(value: Any) -> str:
    """A certificate, or none."""
    if isinstance(value, str) and value.lower() == "none":
        return value
    return cert_in(value)


def folder_out(value: Any) -> str:
    """A folder to write in, made when missing (with its parents)."""
    v = nonempty(value)
    if "://" in v:  # a URL Spark writes to (hdfs://, s3a://): Spark's to check
        return v
    return _path(paths.writable_folder(v), v)


def micropython_tree(value: Any) -> str:
    """A MicroPython source tree (it holds py/mpconfig.h)."""
    v = folder_in(value)
    if not os.path.isfile(os.path.join(v, "py", "mpconfig.h")):
        raise KindError("not a MicroPython source tree (no py/mpconfig.h); give a "
                        "micropython checkout")
    return v


def journal_in(value: Any) -> str:
    """The bridge's journal folder, which the pipeline compacts in place (it writes
    .columns beside the journal files); a missing one is the caller's to judge."""
    v = nonempty(value)
    if "://" in v or not os.path.lexists(v):
        return v
    if not os.path.isdir(v):
        raise KindError("a file, not a folder: give the folder the bridge's --journal "
                        "writes (its files are journal-*.jsonl)")
    why = paths.readable_folder(v) or paths.takes_new_files(v)
    if why is not None:
        raise KindError("%s (the pipeline writes its typed columns in it)" % why)
    return v


def cert_in(value: Any) -> str:
    from pubmote.core.tlscert import load_cert

    v = file_in(value)
    try:
        load_cert(v)
    except ValueError as e:
        raise KindError(str(e).split(": ", 1)[-1]) from None
    return v


def tls_key_in(value: Any) -> str:
    from pubmote.core.tlscert import check_key_file

    v = file_in(value)
    try:
        check_key_file(v)
    except ValueError as e:
        raise KindError(str(e).replace("TLS key %s" % v, "").strip(": ")) \
            from None
    return v


def _key_file(value: Any, load: Callable[[str], object], must_exist: bool) -> str:
    """A private key file: an existing one must load; a missing one (when it may be made)
    must have a folder that takes it."""
    v = nonempty(value)
    if not os.path.lexists(v):
        if must_exist:
            raise KindError(paths.readable_file(v) or "no such file")
        return _path(paths.writable_file(v), v)
    why = paths.readable_file(v)
    if why is not None:
        raise KindError(why)
    try:
        load(v)
    except (OSError, ValueError) as e:
        raise KindError(str(e).replace("key file %s " % v, "").replace(v + ": ", "")) \
            from None
    return v


def _mesh_key(p: str) -> object:
    from pubmote.p2p.identity import load_or_create_key

    return load_or_create_key(p, create=False)


def _dht_key(p: str) -> object:
    from pubmote.dht.bep44 import KeyPair

    return KeyPair.load(p)


def _board_keys(p: str) -> object:
    from pubmote.core.auth import KeysFileError, load_keys

    try:
        return load_keys(p)
    except KeysFileError as e:
        raise ValueError(e.why) from None


def mesh_key(value: Any) -> str:
    return _key_file(value, _mesh_key, must_exist=False)


def mesh_key_in(value: Any) -> str:
    return _key_file(value, _mesh_key, must_exist=True)


def dht_key(value: Any) -> str:
    return _key_file(value, _dht_key, must_exist=False)


def dht_key_in(value: Any) -> str:
    return _key_file(value, _dht_key, must_exist=True)


def board_keys(value: Any) -> str:
    """The boards' keys file (JSON), which `deploy --key-file` adds to."""
    return _key_file(value, _board_keys, must_exist=False)


def board_keys_or_none(value: Any) -> str:
    """A boards' keys file, or none (deploy: the board gets no key)."""
    if isinstance(value, str) and value.lower() == "none":
        return value
    return board_keys(value)


def board_keys_in(value: Any) -> str:
    return _key_file(value, _board_keys, must_exist=True)
