"""Simulated boards from relative paths: `--sim-dir` and `--sim-app-dir` given relative to
where the bridge was started still work (the board itself runs in its own folder)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from e2e import APPS, Collector, boards_registered, free_port
from pubmote.boards.fleet import SimFleet
from pubmote.gateway.bridge import Bridge
from pubmote.gateway.config import load_config


def test_relative_sim_dir_and_app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "tcp://127.0.0.1:%d" % free_port()
    cfg = load_config(None, {"sim_boards": 1, "sim_dir": "boards", "sim_app": "probe_app",
                             "sim_app_dir": os.path.relpath(APPS, tmp_path),
                             "sim_app_config": {"seq_period_ms": 50}, "sp_pub": [url]})

    async def run() -> None:
        async with Bridge(cfg, fleet=SimFleet.from_config(cfg)) as bridge:
            col = Collector(url, b"/test/sim1/seq|")
            try:
                await boards_registered(bridge, ["sim1"])
                await col.wait_for(b"/test/sim1/seq|", 3)
            finally:
                col.close()

    asyncio.run(run())
