"""The roll-out's follow-up of one board, with a stand-in producer: a board whose power went
after it had fetched every segment but before it said "staged" is called again (it finishes
from what it wrote), and the roll-out ends with its report."""

from __future__ import annotations

import asyncio
from typing import Any

from pubmote.gateway.update import rollout
from pubmote.gateway.update.package import AppPackage
from pubmote.gateway.update.producer import BoardUpdate


class Producer:
    """Serves nothing: the test moves each board's update as its board would."""

    def __init__(self, package: AppPackage) -> None:
        self.package = package
        self.updates: dict[str, BoardUpdate] = {}
        self.triggers = 0

    def offer(self, board: str, package: AppPackage, timeout_s: float,
              grace_s: float) -> BoardUpdate:
        u = BoardUpdate(board, package, b"{}")
        self.updates[board] = u
        return u

    def trigger(self, u: BoardUpdate) -> bool:
        self.triggers += 1
        if self.triggers == 1:  # fetches it all, then its power goes: no word
            u.set("fetching")
            u.fetched.update(range(self.package.segments))
        else:  # powered again and called: switches, reboots, its trial goes well
            u.set("staged")
            u.set("healthy")
        return True


def test_a_board_silent_after_fetching_everything_is_called_again(monkeypatch: Any) -> None:
    monkeypatch.setattr(rollout, "POLL_S", 0.01)
    monkeypatch.setattr(rollout, "RETRIGGER_S", 0.1)
    monkeypatch.setattr(rollout, "TRIGGER_EVERY_S", 0.1)
    pkg = AppPackage([("app.py", b"x" * 2000)], "app")
    producer = Producer(pkg)
    r = rollout.Rollout(producer, pkg, ["sim1"], timeout_s=1.0)  # type: ignore[arg-type]
    monkeypatch.setattr(rollout, "REPORT_SLACK_S", 5.0)
    ok = asyncio.run(asyncio.wait_for(r.run(), 30))
    assert ok and producer.triggers == 2, (producer.triggers, r.updates["sim1"].view())
