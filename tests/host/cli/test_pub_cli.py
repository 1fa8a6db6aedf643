"""`pubmote pub URL TOPIC PAYLOAD`: a command published into a bridge's SP SUB endpoint
reaches a board (the demo echoes it on .../ack); --json sends CBOR; every mistake is one
line naming what is wrong, and the PUB endpoint is told from the SUB one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import cbor2

from e2e import Collector, boards_registered, bridge_with_boards, free_port, wait_until

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


async def _pub(*args: str) -> tuple[int, str]:
    p = await asyncio.create_subprocess_exec(PUBMOTE, "pub", *args,
                                             stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(p.communicate(), 60)
    assert p.returncode is not None
    return p.returncode, err.decode()


def test_pub_reaches_a_board(tmp_path: Path) -> None:
    async def run() -> None:
        pub_url = "tcp://127.0.0.1:%d" % free_port()
        sub_url = "tcp://127.0.0.1:%d" % free_port()
        async with bridge_with_boards(tmp_path, 1, sp_pub=[pub_url], sp_sub=[sub_url]) as b:
            await boards_registered(b, ["sim1"])
            # the demo subscribes to its command topic just after it first registers
            await wait_until(lambda: any(f.startswith(b"/pubmote/demo/sim1/command")
                                         for f in b.hub.board("sim1").filters), 30,
                             "the board's command filter")
            col = Collector(pub_url, b"/pubmote/demo/sim1/ack|")
            try:
                pub_ep = next(ep for ep in b.sp if ep.url == pub_url)
                await wait_until(lambda: any(c.ready for c in pub_ep.conns), 30,
                                 "the collector's SP handshake")
                rc, err = await _pub(sub_url, "/pubmote/demo/sim1/command", "hello")
                assert rc == 0 and "sent 1 message" in err, err
                await col.wait_for(b"/pubmote/demo/sim1/ack|hello", 1, timeout_s=60)
                rc, err = await _pub(sub_url, "/pubmote/demo/sim1/command", "--json",
                                     '{"on": true, "n": [1, 2]}')
                assert rc == 0, err
                want = b"/pubmote/demo/sim1/ack|" + cbor2.dumps({"on": True, "n": [1, 2]}, canonical=True)
                await col.wait_for(want, 1, timeout_s=60)
                # the PUB endpoint is not where publishes go: said so, nothing sent
                rc, err = await _pub(pub_url, "/pubmote/demo/sim1/command", "x")
                assert rc == 1 and "SP PUB endpoint" in err and "--sp-sub" in err, err
            finally:
                col.close()

    asyncio.run(asyncio.wait_for(run(), 180))


def test_pub_mistakes_are_one_line() -> None:
    port = free_port()  # reserved, nobody listens
    url = "tcp://127.0.0.1:%d" % port
    cases = [
        (["http://x", "/t", "p"], 2, "tcp://HOST:PORT"),
        ([url, "no-slash", "p"], 2, "TOPIC"),
        ([url, "/t", "{", "--json"], 2, "not JSON"),
        ([url, "/t", "zz", "--hex"], 2, "not hex"),
        ([url, "/t", "p", "--count", "0"], 2, "--count"),
        ([url, "/t", "p", "--interval", "-1"], 2, "--interval"),
        ([url, "/t", "p", "--count", "x"], 2, "--count"),
        ([url, "/t", "p"], 1, "cannot connect"),
    ]
    for args, code, words in cases:
        p = subprocess.run([PUBMOTE, "pub", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == code and words in p.stderr, (args, p.returncode, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
