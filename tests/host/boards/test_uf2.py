"""The UF2 writer the firmware build uses in place of picotool: the block layout the RP2040
boot ROM reads, and a reader that refuses what the boot ROM would not take."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pubmote.boards import uf2


def test_blocks_carry_pages_at_flash_addresses() -> None:
    image = bytes(range(256)) + b"\xaa" * 44  # one whole page and a partial one
    out = uf2.from_bin(image)
    assert len(out) == 2 * 512
    for i, (addr, page) in enumerate(((0x10000000, image[:256]),
                                      (0x10000100, image[256:] + bytes(212)))):
        block = out[i * 512:(i + 1) * 512]
        assert struct.unpack_from("<8I", block) == (
            0x0A324655, 0x9E5D5157, 0x2000, addr, 256, i, 2, 0xE48BFF56)
        assert block[32:288] == page
        assert block[288:508] == bytes(220)
        assert block[508:] == bytes.fromhex("306fb10a")


def test_round_trip_pads_only_the_last_page() -> None:
    image = bytes(range(256)) * 3 + b"\x01"
    start, back = uf2.to_bin(uf2.from_bin(image))
    assert start == uf2.FLASH_BASE
    assert back == image + bytes(255)


@pytest.mark.parametrize("spoil, why", [
    (lambda b: b[:-1], "whole 512-byte blocks"),
    (lambda b: b[:512] + b"\0" + b[513:], "bad UF2 magic"),
    (lambda b: b[:512] + b[512:540] + struct.pack("<I", 0xE48BFF57) + b[544:], "family"),
    (lambda b: b[:512] + b[512:524] + struct.pack("<I", 0x10000400) + b[528:], "gap"),
])
def test_reader_refuses_what_the_boot_rom_would_not_take(spoil: Callable[[bytes], bytes],
                                                         why: str) -> None:
    good = uf2.from_bin(b"\x55" * 600)
    with pytest.raises(ValueError, match=why):
        uf2.to_bin(spoil(good))
