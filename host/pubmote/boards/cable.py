"""A simulated board's "cable": two pty pairs joined by a relay in this process, so a test
can pull and replug it, or write garbage into the line, exactly where a real cable would
fail; and the process plumbing every simulated board shares (detached children that end
with us, stopped by PID)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import random
import signal
import subprocess
import tty
from pathlib import Path

CABLE_BUFFER = 64 * 1024


class Cable:
    """A pty pair for the board, one for the bridge, and a relay between their masters."""

    def __init__(self, board_link: Path, bridge_link: Path) -> None:
        self.board_link = board_link
        self.bridge_link = bridge_link
        self.plugged = False
        self.counters = {"to_bridge": 0, "to_board": 0, "dropped": 0, "injected": 0,
                         "bits_flipped": 0, "bytes_lost": 0}
        # a noisy line: each bit flips with bit_error_rate, each byte is lost with drop_rate
        self.bit_error_rate = 0.0
        self.drop_rate = 0.0
        self._rng = random.Random(1234)
        self._m: list[int] = []
        self._s: list[int] = []
        self._pending: list[bytearray] = [bytearray(), bytearray()]

    def plug(self) -> None:
        """Create both ptys and start relaying (also: replug after pull())."""
        loop = asyncio.get_running_loop()
        for link in (self.board_link, self.bridge_link):
            m, s = os.openpty()
            tty.setraw(s)
            os.set_blocking(m, False)
            self._m.append(m)
            self._s.append(s)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(os.ttyname(s))
        for side in (0, 1):
            loop.add_reader(self._m[side], self._relay, side)
        self.plugged = True

    def pull(self) -> None:
        """Unplug: both ends see the line vanish, as when a USB cable is pulled."""
        loop = asyncio.get_running_loop()
        for m in self._m:
            loop.remove_reader(m)
            loop.remove_writer(m)
        for fd in self._m + self._s:
            try:
                os.close(fd)
            except OSError:
                pass
        self._m, self._s = [], []
        self._pending = [bytearray(), bytearray()]
        for link in (self.board_link, self.bridge_link):
            if link.is_symlink():
                link.unlink()
        self.plugged = False

    def inject(self, side: int, data: bytes) -> None:
        """Write raw bytes into the line towards side 0 (board) or 1 (bridge)."""
        self.counters["injected"] += len(data)
        self._write(side, data)

    def _relay(self, src: int) -> None:
        try:
            chunk = os.read(self._m[src], 4096)
        except BlockingIOError:
            return
        except OSError:
            # EIO: nobody holds this end open (the bridge restarting); look again soon
            loop = asyncio.get_running_loop()
            loop.remove_reader(self._m[src])
            loop.call_later(0.1, self._rearm, src)
            return
        dst = 1 - src
        self.counters["to_bridge" if src == 0 else "to_board"] += len(chunk)
        if self.bit_error_rate or self.drop_rate:
            chunk = self._noise(chunk)
        self._write(dst, chunk)

    def _noise(self, chunk: bytes) -> bytes:
        out = bytearray()
        rng = self._rng
        for sent in chunk:
            if self.drop_rate and rng.random() < self.drop_rate:
                self.counters["bytes_lost"] += 1
                continue
            b = sent
            if self.bit_error_rate and rng.random() < self.bit_error_rate * 8:
                b ^= 1 << rng.randrange(8)
                self.counters["bits_flipped"] += 1
            out.append(b)
        return bytes(out)

    def _rearm(self, side: int) -> None:
        if self.plugged and side < len(self._m):
            asyncio.get_running_loop().add_reader(self._m[side], self._relay, side)

    def _write(self, dst: int, data: bytes) -> None:
        if not self.plugged:
            return
        pend = self._pending[dst]
        if pend:
            if len(pend) + len(data) > CABLE_BUFFER:
                self.counters["dropped"] += len(data)
            else:
                pend += data
            return
        try:
            n = os.write(self._m[dst], data)
        except BlockingIOError:
            n = 0
        except OSError:
            self.counters["dropped"] += len(data)
            return
        if n < len(data):
            pend += data[n:]
            asyncio.get_running_loop().add_writer(self._m[dst], self._flush, dst)

    def _flush(self, dst: int) -> None:
        pend = self._pending[dst]
        try:
            n = os.write(self._m[dst], pend)
        except BlockingIOError:
            return
        except OSError:
            n = len(pend)
        del pend[:n]
        if not pend:
            asyncio.get_running_loop().remove_writer(self._m[dst])


_PR_SET_PDEATHSIG = 1


def end_process(p: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM,
                grace_s: float = 3) -> None:
    """Stop a process we started: `sig`, then SIGKILL after grace_s; always reaped."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(sig)
    try:
        p.wait(grace_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def detach_child() -> None:
    # Popen's preexec_fn (ruff PLW1509: unsafe with threads): prctl and an ignored SIGHUP
    # have no Popen argument. It calls only setsid, signal and prctl (through ctypes).
    # A session of its own (Ctrl-C in the bridge's terminal is the bridge's to handle), and
    # SIGHUP ignored: the pty becomes the board's controlling terminal when it opens it, and
    # a pulled cable must not kill a board, only cut its line. If the process that started
    # the board dies without cleaning up (kill -9), the kernel ends the board too: no
    # orphaned board keeps reopening a pty path that a later bridge reuses.
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: Ctrl-C and SIGTERM still clean up
        pass
