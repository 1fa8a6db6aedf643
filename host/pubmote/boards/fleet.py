"""A fleet of simulated boards of one kind, started and stopped together: what
`pubmote bridge --sim-boards N` runs beside the bridge, built from the same configuration."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pubmote.boards.sim import SimBoard, micropython_exe
from pubmote.core.addresses import parse_hostport
from pubmote.core.auth import key_for_board
from pubmote.core.tlscert import board_settings

SIM_KINDS = ("unix", "pico")

log = logging.getLogger("pubmote.sim")


def network_link(cfg: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The simulated boards' config for a tcp or udp link (`"link": "tcp"` in
    sim_app_config): the bridge's first face of that kind unless host/port are given, and on
    a --tcp face with a certificate, TLS that verifies it, as `pubmote deploy
    --gateway-cert` would install it."""
    link = extra.get("link")
    if link not in ("tcp", "udp"):
        return extra
    if "port" not in extra and cfg.get(link):
        host, port = parse_hostport(cfg[link][0])
        extra["port"] = port
        extra.setdefault("host", {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host))
    if link == "tcp" and cfg.get("tcp_tls_cert") and "tls" not in extra:
        extra.update(board_settings(cfg["tcp_tls_cert"]))
    return extra


class SimFleet:
    """`n` simulated boards named sim1..simN in workdir (created if missing). kind "unix":
    the MicroPython unix port (fast, many boards); "pico": emulated Picos running the real
    rp2 firmware (emu.PicoBoard), on the same kind of pty cable. keyed: each board has a
    key of its own, as `pubmote deploy` gives a real one, kept in workdir/keys.json (0600:
    the same board keeps its key across runs in one --sim-dir); `keys` is the table the
    bridge takes into its policy."""

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> SimFleet:
        """The fleet a bridge configuration asks for (its sim_* keys); without sim_dir the
        boards live in a temporary directory, removed when the fleet stops."""
        tmp = None
        workdir = cfg["sim_dir"]
        if not workdir:
            tmp = tempfile.TemporaryDirectory(prefix="pubmote-sim-")
            workdir = tmp.name
        app_dir = cfg["sim_app_dir"]
        fleet = cls(int(cfg["sim_boards"]), Path(workdir), kind=cfg["sim_kind"],
                    period_ms=int(cfg["sim_period_ms"]), app=cfg["sim_app"],
                    app_dir=Path(app_dir) if app_dir else None,
                    extra=network_link(cfg, dict(cfg["sim_app_config"])),
                    keyed=bool(cfg.get("sim_keys", True)))
        fleet._tmp = tmp
        return fleet

    def __init__(self, n: int, workdir: Path, kind: str = "unix", *, keyed: bool = False,
                 **board_kw: object) -> None:
        if n < 1 or n > 64:
            raise ValueError("--sim-boards takes 1..64 boards")
        if kind not in SIM_KINDS:
            raise ValueError("--sim-kind is one of %s, not %r" % (", ".join(SIM_KINDS), kind))
        workdir.mkdir(parents=True, exist_ok=True)
        self.kind = kind
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.kept_logs: list[str] = []  # of boards that crashed, after stop()
        self._reported: set[str] = set()  # boards whose crash was logged
        self.boards: list[SimBoard] = []
        self.keys: dict[str, bytes] = {}
        for i in range(n):
            name = "sim%d" % (i + 1)
            if kind == "pico":
                from pubmote.boards.emu import PicoBoard

                board: SimBoard = PicoBoard(name, workdir, **board_kw)  # type: ignore[arg-type]
            else:
                board = SimBoard(name, workdir, **board_kw)  # type: ignore[arg-type]
            if keyed:
                self.keys[name] = key_for_board(workdir / "keys.json", name)
                board.config["key"] = self.keys[name].hex()
            self.boards.append(board)

    def start(self) -> None:
        # fail early, with the hint, before any pty is made
        if self.kind == "pico":
            from pubmote.boards.emu import firmware_bin, node_exe

            node_exe()
            firmware_bin()
        else:
            micropython_exe()
        for b in self.boards:
            b.start()

    def board_keys(self) -> dict[str, bytes]:
        """Board name -> key of the keyed boards, for the bridge's policy."""
        return dict(self.keys)

    def serial_ports(self) -> list[str]:
        """The ports of the boards on a cable (pty: the unix port; uart: an emulated Pico),
        for the bridge to open; the others dial its --tcp/--udp faces."""
        return [b.port for b in self.boards if b.config["link"] in ("pty", "uart")]

    def crashed(self) -> dict[str, str]:
        """port -> the last error line, for each board whose app ended by itself; each
        crash is logged (a warning, with where the board's log is) when first seen."""
        out = {}
        for b in self.boards:
            if b.rebooted():
                log.info("simulated board %s rebooted", b.name)
                continue
            why = b.crashed()
            if why is None:
                self._reported.discard(b.name)  # running again (a reset)
                continue
            out[b.port] = why
            if b.name not in self._reported:
                self._reported.add(b.name)
                log.warning("simulated board %s crashed (%s); its log: %s%s", b.name, why,
                            b.log_path, " (kept when the bridge stops)" if self._tmp else "")
        return out

    def stop(self) -> None:
        """Stop every board; the logs of boards that crashed are kept (copied out of a
        temporary folder before it goes): logged, and their paths in kept_logs."""
        crashed = [(b, b.crashed()) for b in self.boards if b.crashed() is not None]
        for b in self.boards:
            b.stop()
        kept = []
        for b, why in crashed:
            path = b.log_path
            if self._tmp is not None:
                fd, name = tempfile.mkstemp(prefix="pubmote-%s-crash-" % b.name, suffix=".log")
                with os.fdopen(fd, "wb") as out, contextlib.suppress(OSError), \
                        open(b.log_path, "rb") as src:
                    shutil.copyfileobj(src, out)
                path = Path(name)
            log.warning("simulated board %s crashed (%s); its log, kept: %s", b.name, why, path)
            kept.append(str(path))
        self.kept_logs = kept
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
