"""The one parser per address form (core/addresses.py): exact results, and each mistake
an AddressError (a ValueError) that says what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from pubmote.core.addresses import (
    AddressError,
    check_serial,
    parse_hostport,
    parse_serial,
    parse_tcp_url,
)


@pytest.mark.parametrize("spec,want", [
    ("127.0.0.1:5700", ("127.0.0.1", 5700)),
    (":6881", ("127.0.0.1", 6881)),
    ("[::1]:0", ("::1", 0)),
    ("router.example:65535", ("router.example", 65535)),
])
def test_hostport(spec: str, want: tuple[str, int]) -> None:
    assert parse_hostport(spec) == want


@pytest.mark.parametrize("spec", ["127.0.0.1", "host:port", "h:65536", "", "h:-1"])
def test_hostport_mistakes(spec: str) -> None:
    with pytest.raises(AddressError):
        parse_hostport(spec)


def test_tcp_url() -> None:
    assert parse_tcp_url("tcp://*:5560") == ("0.0.0.0", 5560)
    assert parse_tcp_url("tcp://127.0.0.1:5561") == ("127.0.0.1", 5561)
    for bad in ("udp://127.0.0.1:1", "tcp://127.0.0.1", "127.0.0.1:1"):
        with pytest.raises(AddressError):
            parse_tcp_url(bad)


def test_serial_specs(tmp_path: Path) -> None:
    assert parse_serial("/dev/ttyUSB0:9600") == ("/dev/ttyUSB0", 9600)
    assert parse_serial("/dev/ttyUSB0") == ("/dev/ttyUSB0", 115200)
    # a port not plugged in yet is fine; a file, a folder, /dev/null or a bad baud is not
    assert check_serial("/dev/ttyNOPE9:57600") == ("/dev/ttyNOPE9", 57600)
    f = tmp_path / "file"
    f.write_text("")
    for bad in (str(f), str(tmp_path), "/dev/null", "/dev/ttyNOPE9:abc", "/dev/ttyNOPE9:10"):
        with pytest.raises(AddressError) as e:
            check_serial(bad)
        assert str(e.value).startswith("--serial ")
