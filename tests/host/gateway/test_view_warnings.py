"""The live view's last warnings: the bridge's WARNING and ERROR lines, the last few of a
bounded ring, with their time, shown as plain text (a warning quoting a peer cannot inject
rich markup or terminal escapes); and the view's NDN/DHT figures beside the status line's."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path

from rich.console import Console

from pubmote.gateway.recent import RECENT_MAX, RecentWarnings, install
from pubmote_wire import sp

HOSTILE = "[bold red]owned[/] \x1b]0;retitled\x07\x1b[2J"


def _text(group: object) -> str:
    console = Console(record=True, width=300, force_terminal=True)
    console.print(group)
    return console.export_text(styles=False)


def test_the_ring_keeps_the_last_warnings_escaped_with_their_time() -> None:
    log = logging.getLogger("pubmote.test_recent")
    recent = RecentWarnings()
    log.addHandler(recent)
    try:
        log.info("not a warning")
        for i in range(RECENT_MAX + 3):
            log.warning("warning %d", i)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("it failed: %s", HOSTILE + "\nsecond line")
    finally:
        log.removeHandler(recent)
    lines = recent.lines()
    assert len(lines) == RECENT_MAX and recent.seen == RECENT_MAX + 4
    assert "warning 3" not in " ".join(lines) and lines[0].endswith("warning 4")
    assert re.match(r"\d\d:\d\d:\d\d WARNING pubmote\.test_recent: warning 4$", lines[0])
    last = lines[-1]
    assert "\x1b" not in last and "\n" not in last and "second line" not in last
    assert "\\x1b]0;retitled\\x07" in last and last.endswith("(more in the log)")
    assert " ERROR " in last


def test_the_view_shows_the_last_warnings_as_plain_text(tmp_path: Path) -> None:
    from pubmote.gateway.bridge import Bridge
    from pubmote.gateway.config import load_config
    from pubmote.gateway.view import render

    # anonymous boards allowed: a warning the bridge logs as it starts
    cfg = load_config(None, {"sp_sub": ["tcp://127.0.0.1:0"], "retained": ["/site/temp"],
                             "ndn_face": ["tcp://127.0.0.1:0"], "allow_anonymous_boards": True,
                             "dht_key_file": str(tmp_path / "dht.key")})
    recent = install(logging.getLogger("pubmote"))

    async def run() -> tuple[str, str, str]:
        async with Bridge(cfg) as bridge:
            calm = _text(render(bridge, RecentWarnings()))
            started = _text(render(bridge, recent))
            logging.getLogger("pubmote.test").warning("a peer said %s", HOSTILE)
            # and one the bridge logs itself, quoting what a peer sent
            port = bridge.sp[0].server.sockets[0].getsockname()[1]
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(sp.header(sp.PUB) + sp.encode_msg(b"[blink]no separator[/blink]"))
            await w.drain()
            deadline = time.monotonic() + 30
            while not bridge.sp[0].counters["bad_messages"]:
                assert time.monotonic() < deadline, "the bad SP message was not counted"
                await asyncio.sleep(0.05)
            w.close()
            return calm, started, _text(render(bridge, recent))

    try:
        calm, started, text = asyncio.run(run())
    finally:
        logging.getLogger("pubmote").removeHandler(recent)
    assert "last warnings: none" in calm
    # the bridge's own start-up warnings are there from the start
    assert re.search(r"WARNING pubmote\.bridge: board authentication", started), started
    n = int(re.search(r"last warnings \(\d of (\d+); all of them in the log\):", text)[1])
    assert n == int(re.search(r"last warnings \(\d of (\d+);", started)[1]) + 2, text
    # the markup is shown, not applied; the escapes are shown, not sent to the terminal
    assert "a peer said [bold red]owned[/] \\x1b]0;retitled\\x07\\x1b[2J" in text, text
    assert "\x1b" not in text
    assert re.search(r"\d\d:\d\d:\d\d WARNING pubmote\.sp: SP tcp://127\.0\.0\.1:0: dropped 1 "
                     r"bad message\(s\) from .*\[blink\]no separator\[/blink\]", text), text
    # the NDN and DHT figures of the status line are in the view too
    assert re.search(r"NDN tcp://127\.0\.0\.1:\d+: 0 apps", text), text
    assert re.search(r"DHT: \d+ nodes known, 1 topics", text), text
