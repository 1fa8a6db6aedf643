"""The demo app's commander (firmware demo.py on CPython, behind a stand-in node): every
command is answered on .../ack, and one whose reply fails (the link gone mid-publish) is
counted and said, not the end of the answers to the commands after it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pubmote_node import demo


class _Msg:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class _Sub:
    def __init__(self, payloads: list[bytes]) -> None:
        self.q: asyncio.Queue[_Msg] = asyncio.Queue()
        for p in payloads:
            self.q.put_nowait(_Msg(p))

    async def recv(self) -> _Msg:
        return await self.q.get()


class _Node:
    """What the commander uses of a Node; publishes whose payload is in `fail` raise."""

    name = "b1"

    def __init__(self, commands: list[bytes], fail: tuple[bytes, ...]) -> None:
        self.counters: dict[str, int] = {}
        self.sub = _Sub(commands)
        self.fail = fail
        self.published: list[tuple[str, bytes]] = []

    def subscribe(self, filt: str) -> _Sub:
        assert filt == "/pubmote/demo/b1/command|"
        return self.sub

    def directed(self, sub: _Sub) -> None:
        assert sub is self.sub

    def stats(self) -> dict[str, Any]:
        return dict(self.counters)

    async def publish(self, topic: str, payload: bytes, wait: bool = True) -> bool:
        if payload in self.fail:
            raise OSError(5, "link gone")
        self.published.append((topic, payload))
        return True


@pytest.mark.parametrize("failing", [b"first", b"stats"])
def test_a_failed_reply_is_counted_and_later_commands_are_answered(
        failing: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    node = _Node([b"first", b"stats", b"third"], fail=(failing,))

    async def run() -> None:
        task = asyncio.create_task(demo.commander(node))
        deadline = asyncio.get_running_loop().time() + 30
        while not any(p == b"third" for _, p in node.published):
            assert not task.done(), task  # the commander ended
            assert asyncio.get_running_loop().time() < deadline, node.published
            await asyncio.sleep(0.001)
        task.cancel()

    asyncio.run(run())
    acks = [p for t, p in node.published if t == "/pubmote/demo/b1/ack"]
    assert acks == [c for c in [b"first", b"stats", b"third"] if c != failing]
    assert node.counters["app_errors"] == 1
    assert "failed: OSError" in capsys.readouterr().out
