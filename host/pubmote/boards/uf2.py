"""UF2 images for the RP2040's boot ROM: a flat flash image (firmware.bin) cut into 256-byte
payloads, one per 512-byte block, addressed from the start of flash (XIP 0x10000000).

The firmware build writes the UF2 itself instead of building picotool (about 45 s of a
cold build) only to convert a file; for the rp2 port's firmware.bin the result is byte for
byte what picotool writes (checked against picotool 2.1.1 on the RPI_PICO build).
Format: https://github.com/microsoft/uf2 (the block layout), RP2040 datasheet 2.8.4.2
(the family id the boot ROM accepts)."""

from __future__ import annotations

import struct

MAGIC_START0 = 0x0A324655  # "UF2\n"
MAGIC_START1 = 0x9E5D5157
MAGIC_END = 0x0AB16F30
FLAG_FAMILY_ID = 0x00002000  # the file-size field holds a family id
RP2040_FAMILY = 0xE48BFF56
FLASH_BASE = 0x10000000
BLOCK = 512
PAYLOAD = 256  # a flash page: what the boot ROM programs per block
DATA_FIELD = 476
_HEADER = struct.Struct("<8I")


def from_bin(image: bytes, base: int = FLASH_BASE, family: int = RP2040_FAMILY) -> bytes:
    """The UF2 file holding `image` at `base` (the last page padded with zeros)."""
    count = (len(image) + PAYLOAD - 1) // PAYLOAD
    out = bytearray(count * BLOCK)
    for i in range(count):
        at = i * BLOCK
        _HEADER.pack_into(out, at, MAGIC_START0, MAGIC_START1, FLAG_FAMILY_ID,
                          base + i * PAYLOAD, PAYLOAD, i, count, family)
        page = image[i * PAYLOAD:(i + 1) * PAYLOAD]
        out[at + 32:at + 32 + len(page)] = page
        struct.pack_into("<I", out, at + 32 + DATA_FIELD, MAGIC_END)
    return bytes(out)


def to_bin(uf2: bytes, family: int = RP2040_FAMILY) -> tuple[int, bytes]:
    """(start address, flat image) of a UF2 file of contiguous blocks for `family`; raises
    ValueError naming the first block that is not."""
    if not uf2 or len(uf2) % BLOCK:
        raise ValueError("a UF2 file is whole 512-byte blocks; this one is %d bytes" % len(uf2))
    count = len(uf2) // BLOCK
    start = 0
    image = bytearray()
    for i in range(count):
        m0, m1, flags, addr, size, no, total, fam = _HEADER.unpack_from(uf2, i * BLOCK)
        (end,) = struct.unpack_from("<I", uf2, i * BLOCK + 32 + DATA_FIELD)
        if (m0, m1, end) != (MAGIC_START0, MAGIC_START1, MAGIC_END):
            raise ValueError("block %d: bad UF2 magic" % i)
        if not flags & FLAG_FAMILY_ID or fam != family:
            raise ValueError("block %d: family %#x, not %#x" % (i, fam, family))
        if no != i or total != count or size > DATA_FIELD:
            raise ValueError("block %d: numbered %d of %d, %d bytes" % (i, no, total, size))
        if i == 0:
            start = addr
        elif addr != start + len(image):
            raise ValueError("block %d: address %#x leaves a gap" % (i, addr))
        image += uf2[i * BLOCK + 32:i * BLOCK + 32 + size]
    return start, bytes(image)
