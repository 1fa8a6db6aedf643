"""pubmote_node.flashfs.PageFlash on CPython, over a NOR flash model (programming ANDs the
bytes in, whole 256-byte pages at aligned offsets only, as the RP2040 boot ROM's
flash_range_program wants): littlefs's 32-byte writes reach the chip as whole pages padded
with 0xff, so what was programmed before in the same page stays. The module imports the
rp2 port's vfs and _rp2, stood in for here."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator

import pytest

BLOCK = 4096
PAGE = 256


class NorFlash:
    """A few erase blocks of NOR flash, with rp2.Flash's block-device methods."""

    def __init__(self, blocks: int = 2) -> None:
        self.mem = bytearray(b"\xff" * (blocks * BLOCK))
        self.programs: list[tuple[int, int]] = []  # (offset, length) of each program

    def readblocks(self, block: int, buf: bytearray, off: int = 0) -> None:
        a = block * BLOCK + off
        buf[:] = self.mem[a : a + len(buf)]

    def writeblocks(self, block: int, buf: bytes, off: int | None = None) -> None:
        a = block * BLOCK
        if off is None:  # erase, then program the whole block
            self.mem[a : a + BLOCK] = b"\xff" * BLOCK
            off = 0
        a += off
        assert a % PAGE == 0 and len(buf) % PAGE == 0, "the ROM programs whole pages only"
        self.programs.append((a, len(buf)))
        for i, b in enumerate(buf):
            self.mem[a + i] &= b

    def ioctl(self, op: int, arg: int) -> int:
        return 0


@pytest.fixture
def flashfs() -> Iterator[types.ModuleType]:
    stubs = {"vfs": types.ModuleType("vfs"), "_rp2": types.ModuleType("_rp2")}
    stubs["_rp2"].Flash = NorFlash  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    sys.modules.pop("pubmote_node.flashfs", None)
    try:
        yield importlib.import_module("pubmote_node.flashfs")
    finally:
        sys.modules.pop("pubmote_node.flashfs", None)
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_small_writes_reach_the_chip_as_whole_pages(flashfs: types.ModuleType) -> None:
    chip = NorFlash()
    dev = flashfs.PageFlash(chip)
    a = bytes(range(32))
    b = bytes(range(100, 132))
    dev.writeblocks(1, a, 0)
    dev.writeblocks(1, b, 32)  # the same page: what the first wrote stays
    assert chip.programs == [(BLOCK, PAGE), (BLOCK, PAGE)]
    got = bytearray(64)
    dev.readblocks(1, got, 0)
    assert bytes(got) == a + b
    assert chip.mem[BLOCK + 64 : BLOCK + PAGE] == b"\xff" * (PAGE - 64)


def test_a_write_across_a_page_boundary_programs_both_pages(flashfs: types.ModuleType) -> None:
    chip = NorFlash()
    dev = flashfs.PageFlash(chip)
    data = bytes(range(64))
    dev.writeblocks(0, data, PAGE - 32)
    assert chip.programs == [(0, 2 * PAGE)]
    assert chip.mem[PAGE - 32 : PAGE + 32] == data
    assert chip.mem[0 : PAGE - 32] == b"\xff" * (PAGE - 32)


def test_whole_pages_and_whole_blocks_go_through_unchanged(flashfs: types.ModuleType) -> None:
    chip = NorFlash()
    dev = flashfs.PageFlash(chip)
    page = bytes([0x5A]) * PAGE
    dev.writeblocks(0, page, PAGE)
    assert chip.programs == [(PAGE, PAGE)]
    block = bytes([0x42]) * BLOCK
    dev.writeblocks(1, block)  # no offset: erase and program the block
    assert chip.mem[BLOCK : 2 * BLOCK] == block
    # reads and ioctl are the chip's own methods (no Python frame of PageFlash per read)
    assert dev.readblocks == chip.readblocks
    assert dev.ioctl == chip.ioctl
