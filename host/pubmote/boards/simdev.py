"""A simulated board you deploy to like a real one (`pubmote simdev`): the MicroPython unix
port with a REPL on a pty made by socat (what mpremote talks to, every command prefixed with
`resume`), a flash directory (its filesystem), and the app booted from `main.py` on a second
line to the bridge, as an ESP32 with a USB REPL and a UART to the gateway.

A soft reset ends the unix port's REPL; the supervisor takes that as the board resetting:
it restarts the app from the files now in flash and opens a new REPL.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
from pathlib import Path

from pubmote.boards.cable import Cable, detach_child, end_process
from pubmote.boards.profiles import load_profile
from pubmote.boards.sim import micropython_exe

log = logging.getLogger("pubmote.simdev")


def socat_exe() -> str:
    exe = shutil.which("socat")
    if exe is None:
        raise FileNotFoundError("socat not found: run `make setup` (Debian package socat), "
                                "or `sudo apt-get install -y socat`")
    return exe


class SimDevice:
    """One simulated board in `workdir`: `repl` (for mpremote), `tty` (for the bridge)."""

    def __init__(self, workdir: Path, *, heap: str | None = None) -> None:
        self.workdir = workdir
        self.flash = workdir / "flash"
        self.repl_port = workdir / "repl"
        self.cable = Cable(workdir / "board.link", workdir / "tty")
        self.heap = heap or str(load_profile("unix")["heapsize"])
        self.log_path = workdir / "board.log"
        self.repl: subprocess.Popen[bytes] | None = None
        self.app: subprocess.Popen[bytes] | None = None
        self.resets = 0

    def start(self) -> None:
        self.flash.mkdir(parents=True, exist_ok=True)
        self.cable.plug()
        self._start_repl()
        self._boot_app()

    def _start_repl(self) -> None:
        cmd = "%s -X heapsize=%s" % (micropython_exe(), self.heap)
        self.repl = subprocess.Popen(
            [socat_exe(), "PTY,link=%s,raw,echo=0" % self.repl_port,
             "EXEC:%s,pty,raw,echo=0,stderr,setsid,ctty" % cmd],
            cwd=self.flash, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=detach_child)  # noqa: PLW1509 - see detach_child

    def _boot_app(self) -> None:
        if not (self.flash / "main.py").exists():
            log.info("no main.py in flash yet: the board waits for a deploy")
            return
        with open(self.log_path, "ab") as logf:
            self.app = subprocess.Popen(
                [micropython_exe(), "-X", "heapsize=" + self.heap, "main.py"], cwd=self.flash,
                stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, MICROPYPATH=".frozen:lib"),
                preexec_fn=detach_child)  # noqa: PLW1509 - see detach_child

    def reset(self) -> None:
        """Power-cycle: the app restarts from flash, the REPL comes back."""
        self.resets += 1
        end_process(self.app)
        self.app = None
        if self.repl is not None and self.repl.poll() is None:
            end_process(self.repl)
        self._start_repl()
        self._boot_app()

    async def supervise(self) -> None:
        """Run until cancelled: a REPL that ended (soft reset) resets the board."""
        while True:
            await asyncio.sleep(0.1)
            if self.repl is not None and self.repl.poll() is not None:
                log.info("REPL ended (soft reset): resetting the board")
                self.reset()

    def stop(self) -> None:
        end_process(self.app)
        end_process(self.repl)
        self.app = self.repl = None
        if self.cable.plugged:
            self.cable.pull()

