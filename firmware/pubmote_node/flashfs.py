# The rp2 board's filesystem remounted with littlefs's small caches (boot.py, on a board
# whose config keeps no durable outbox). The port's _boot.py mounts it with 256-byte
# program units, the flash chip's page: littlefs then takes 4 x 256 bytes for each of its
# read and program caches (extmod/vfs_lfsx.c), 2 kB of the board's heap for good. Here the
# chip is given to littlefs in 32-byte units (MicroPython's own default), its writes padded
# to whole pages with 0xff, which leaves a NOR flash cell as it was: 128-byte caches,
# -1.3 kB on the emulated Pico (the demo's steady state, the PageFlash class included).
# Files up to 128 bytes then stay inline in their directory (512 bytes with the port's
# mount): the durable outbox's 512-byte segments (outlog.py) rely on the larger limit, so
# a board with outbox_dir keeps the port's mount.
import vfs
from _rp2 import Flash

from pubmote_wire.compat import const

_UNIT = const(32)  # littlefs's read and program size here
_PAGE = const(256)  # what the chip's ROM routine programs at once (whole pages)


class PageFlash:
    """rp2.Flash whose writes of any 32-byte-aligned piece reach the chip as whole pages."""

    def __init__(self, flash):
        # the chip's own methods where nothing needs adding: no Python frame per read
        self.readblocks = flash.readblocks
        self.ioctl = flash.ioctl
        self._write = flash.writeblocks

    def writeblocks(self, block, buf, off=None):
        if off is None:  # erase and program the whole block
            self._write(block, buf)
            return
        n = len(buf)
        start = off & ~(_PAGE - 1)
        end = (off + n + _PAGE - 1) & ~(_PAGE - 1)
        if start == off and end == off + n:
            self._write(block, buf, off)
            return
        page = bytearray(b"\xff" * (end - start))
        page[off - start : off - start + n] = buf
        self._write(block, page, start)


def remount():
    """Mount "/" again over PageFlash with 32-byte units; the port's mount stays if
    littlefs refuses it. True once remounted. No file may be open."""
    try:
        fs = vfs.VfsLfs2(PageFlash(Flash()), readsize=_UNIT, progsize=_UNIT)
    except OSError:
        return False
    vfs.umount("/")
    vfs.mount(fs, "/")
    import os

    os.chdir("/")
    return True
