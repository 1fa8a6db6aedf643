"""A board's small message rides inline in its notify (INLINE_MSG): the bridge acks it
without fetching, refuses an inline Data that is not the announced message (and fetches
instead), and a board with inline off is fetched from as before. ndn-python-repo's own
NotifyAppParam parser skips the element, as NDN's non-critical TLV rule says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ndn.encoding import Name
from ndn_python_repo.utils.pubsub import NotifyAppParam

from e2e import Collector, boards_registered, bridge_with_boards, free_port, wait_until
from pubmote_wire import framing, interest, name, notify


def _notify(inline: bytes, topic: str = "/test/sim1/forged") -> bytes:
    buf = bytearray(600)
    n = notify.encode_notify_interest(buf, 0, name.from_uri(topic),
                                      name.from_uri("/pubmote/node/sim1"), b"\x01\x02\x03\x04",
                                      inline=inline)
    return bytes(buf[:n])


def test_ndn_python_repo_parser_skips_the_inline_element() -> None:
    buf = bytearray(200)
    n = notify.encode_msg_data(buf, 0, name.from_uri("/p"), name.from_uri("/t"), b"abcd", b"x")
    i = interest.decode_interest(_notify(bytes(buf[:n])))
    p = NotifyAppParam.parse(bytes(i.app_params or b""))
    assert Name.to_str(p.publisher_prefix) == "/pubmote/node/sim1"
    assert bytes(p.notify_nonce) == b"\x01\x02\x03\x04"


def _fetches(trace: Path) -> list[str]:
    """The names of the msg Interests the bridge sent to the board (its fetches)."""
    out = []
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        if rec["dir"] == "out" and bytes.fromhex(rec["hex"])[:1] == b"\x05":
            i = interest.decode_interest(bytes.fromhex(rec["hex"]))
            if b"\x08\x03msg" in bytes(i.name):
                out.append(name.to_uri(bytes(i.name)))
    return out


def _run(tmp: Path, inline: bool) -> tuple[dict[str, int], list[str]]:
    url = "tcp://127.0.0.1:%d" % free_port()
    trace = tmp / "trace.jsonl"

    async def go() -> dict[str, int]:
        async with bridge_with_boards(tmp, 1, app="probe_app", sp_pub=[url], trace=str(trace),
                                      extra={"seq_period_ms": 20, "inline": inline,
                                             "batch": False}) as bridge:
            col = Collector(url, b"/test/sim1/seq|")
            try:
                await boards_registered(bridge, ["sim1"])
                await col.wait_for(b"/test/sim1/seq|", 20)
                if inline:
                    # a notify whose inline Data is not the message it announces
                    assert bridge.fleet is not None
                    buf = bytearray(200)
                    n = notify.encode_msg_data(buf, 0, name.from_uri("/pubmote/node/sim1"),
                                               name.from_uri("/other"), b"\x01\x02\x03\x04",
                                               b"x")
                    bridge.fleet.boards[0].cable.inject(1, framing.encode(_notify(
                        bytes(buf[:n]))))
                    await wait_until(lambda: bridge.hub.counters["inline_refused"] == 1, 10,
                                     "the forged inline message to be refused")
                    await wait_until(lambda: bridge.hub.counters["fetch_failed"] == 1, 10,
                                     "the fetch that replaces it (the board has no such msg)")
            finally:
                col.close()
            return dict(bridge.hub.counters)

    counters = asyncio.run(go())
    return counters, _fetches(trace)


def test_inline_messages_are_not_fetched(tmp_path: Path) -> None:
    counters, fetches = _run(tmp_path, inline=True)
    assert counters["inline"] >= 20, counters
    # only the forged notify's message was fetched (with the bridge's retries)
    assert fetches and all("/test/sim1/forged/" in f for f in fetches), fetches


def test_a_board_without_inline_is_fetched_from(tmp_path: Path) -> None:
    counters, fetches = _run(tmp_path, inline=False)
    assert counters["inline"] == 0 and counters["inline_refused"] == 0, counters
    assert len(fetches) >= 20, fetches
