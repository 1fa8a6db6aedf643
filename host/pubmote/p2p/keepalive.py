"""Keepalive: a Yamux ping on each connection every keepalive_interval_s; a connection
whose peer stops answering within keepalive_timeout_s is closed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from pubmote.p2p.connmgr import Connection
from pubmote.p2p.errors import MeshError

log = logging.getLogger("pubmote.p2p.host")


async def keepalive(conn: Connection, interval_s: float, timeout_s: float,
                    spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    """Ping conn's peer until the connection closes; close it (a task spawned) when a
    ping goes unanswered."""
    while not conn.is_closed:
        await asyncio.sleep(interval_s)
        try:
            await conn.session.ping(timeout_s)
        except (TimeoutError, MeshError):
            if not conn.is_closed:
                log.warning("mesh: %s stopped answering pings; closing", conn.peer_id)
                spawn(conn.close("keepalive ping timed out"))
            return
