"""Fuzz targets for the bridge's host-only parsers (CPython): the NFD-compatible face's
StreamDecoder and the rib command's ControlParameters. Shared by tests/fuzz/run.py and the
corpus replay in tests/host/wire/test_fuzz_corpus.py; the codec's own targets live in
tests/shared/test_corpus.py (they run on MicroPython too)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "shared"))

from pubmote.core import nfd_mgmt
from pubmote.faces import ndn as ndn_face
from pubmote_wire import name as ndn_name
from pubmote_wire.errors import DecodeError
from test_corpus import chunks

MAX_PACKET = 512


def _stream(feeds: list[bytes]) -> list[bytes] | None:
    d = ndn_face.StreamDecoder(max_packet=MAX_PACKET)
    out: list[bytes] = []
    for c in feeds:
        try:
            got = d.feed(c)
        except DecodeError:
            return None
        for pkt in got:
            assert len(pkt) <= MAX_PACKET
        out += got
        # What it holds is one incomplete element: never more than a packet or a header.
        assert len(d.buf) < max(MAX_PACKET, 18)
    return out


def fuzz_ndn_stream(data: bytes) -> None:
    feeds = chunks(data)
    a = _stream(feeds)
    b = _stream([b"".join(feeds)])
    assert a == b  # chunking changes nothing, errors included
    if a:
        assert b"".join(a) == b"".join(feeds)[: sum(len(p) for p in a)]


def fuzz_ndn_control(data: bytes) -> None:
    try:
        out = nfd_mgmt.parse_control_parameters(data)
        ndn_name.validate(out["name"])
        assert set(out) <= {"name", "face_id", "cost", "flags", "origin", "expiration"}
    except DecodeError:
        pass
    try:
        nfd_mgmt.command_parameters(data)
    except DecodeError:
        pass


TARGETS = {"ndn_stream": fuzz_ndn_stream, "ndn_control": fuzz_ndn_control}
