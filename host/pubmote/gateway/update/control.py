"""The bridge's local control endpoint: a unix socket (mode 0600, in a folder of mode 0700;
never on the network) that `pubmote update` talks to in JSON lines. A request is one line:
{"cmd": "status"} is answered with one line, {"cmd": "update", ...} with a line per change
of a board's progress and a last line {"event": "done"}; a request that cannot be done is
answered {"error": "..."} (one line, for the user)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import socket
import stat
import tempfile
from typing import Any

from pubmote.gateway.update.package import AppPackage, PackageError, app_module
from pubmote.gateway.update.producer import UpdateProducer
from pubmote.gateway.update.rollout import Rollout

log = logging.getLogger("pubmote.update")

MAX_REQUEST = 1 << 20


def control_path() -> str:
    """$PUBMOTE_CONTROL, else $XDG_RUNTIME_DIR/pubmote/bridge.sock, else
    /tmp/pubmote-<uid>/bridge.sock."""
    env = os.environ.get("PUBMOTE_CONTROL")
    if env:
        return env
    run = os.environ.get("XDG_RUNTIME_DIR")
    base = (os.path.join(run, "pubmote") if run
            else os.path.join(tempfile.gettempdir(), "pubmote-%d" % os.getuid()))
    return os.path.join(base, "bridge.sock")


def natural(name: str) -> tuple[Any, ...]:
    """sim2 before sim10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


class ControlServer:
    """Serves `pubmote update` for a running bridge's hub."""

    def __init__(self, hub: Any, face_id: int, path: str | None = None) -> None:
        self.hub = hub
        self.path = path or control_path()
        self.producer = UpdateProducer(hub, face_id)
        self.rollout: Rollout | None = None
        self._task: asyncio.Task[bool] | None = None
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> bool:
        """Bind the socket; False (logged) when another bridge already answers on it."""
        folder = os.path.dirname(self.path) or "."
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.path.lexists(self.path):
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise OSError("%s exists and is not a socket: remove it, or set "
                              "PUBMOTE_CONTROL" % self.path)
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(self.path)
                    log.warning("control endpoint %s: another bridge answers there; "
                                "`pubmote update` reaches that one", self.path)
                    return False
                except OSError:
                    os.unlink(self.path)  # left by a bridge that is gone
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._client, self.path,
                                                           limit=MAX_REQUEST)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        log.info("control endpoint (pubmote update): %s", self.path)
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.producer.close()

    async def _client(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        def send(obj: dict[str, Any]) -> None:
            if not writer.is_closing():
                writer.write(json.dumps(obj).encode() + b"\n")

        try:
            line = await reader.readline()
            req = json.loads(line)
            if req.get("cmd") == "status":
                send(self.status())
            elif req.get("cmd") == "update":
                why = self._start(req, send)
                if why is not None:
                    send({"error": why})
                elif self._task is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self._task)
            else:
                send({"error": "unknown request"})
            await writer.drain()
        except (ValueError, AttributeError):
            send({"error": "not a request (one JSON line)"})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def status(self) -> dict[str, Any]:
        ups = self.producer.updates
        boards = []
        for name in sorted(set(self.hub.board_names()) | set(ups), key=natural):
            b = self.hub.board(name)
            row: dict[str, Any] = {"board": name, "up": b is not None and b.up}
            u = ups.get(name)
            row.update(u.view() if u is not None else {"state": "-"})
            boards.append(row)
        return {"running": self._task is not None and not self._task.done(),
                "boards": boards}

    def _start(self, req: dict[str, Any], send: Any) -> str | None:
        """Start the roll-out a request asks for; the reason when it cannot be."""
        if self._task is not None and not self._task.done():
            return "an update is running (pubmote update --status shows it)"
        known = sorted(self.hub.board_names(), key=natural)
        boards = known if req.get("all") else list(req.get("boards") or [])
        if not boards:
            return ("no boards are registered with the bridge" if req.get("all")
                    else "no boards to update (name them, or --all)")
        unknown = [b for b in boards if b not in known]
        if unknown:
            return "unknown board%s %s (the bridge knows %s)" % (
                "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(known) or "none")
        keys = self.hub.auth.keys if self.hub.auth is not None else {}
        keyless = [b for b in boards if b not in keys]
        if keyless:
            return ("%s ha%s no key: an update is signed with the board's key (give it one "
                    "with `pubmote deploy`)" % (", ".join(keyless),
                                               "ve" if len(keyless) > 1 else "s"))
        try:
            files = [(str(n), base64.b64decode(d)) for n, d in req["files"]]
            config = dict(req.get("config") or {})
            app = app_module([n for n, _ in files], config.pop("app", None))
            package = AppPackage(files, app, config)
        except (PackageError, KeyError, TypeError, ValueError) as e:
            return "bad update: %s" % e
        self.rollout = Rollout(self.producer, package, boards,
                               canary=int(req.get("canary") or 0),
                               timeout_s=float(req.get("timeout_s") or 60.0),
                               grace_s=float(req.get("grace_s") or 5.0), emit=send)
        log.info("update %s (%d bytes) of %s%s", package.version, len(package.blob),
                 ", ".join(boards), ", canary %d" % self.rollout.canary
                 if self.rollout.canary else "")
        self._task = asyncio.create_task(self.rollout.run())
        return None
