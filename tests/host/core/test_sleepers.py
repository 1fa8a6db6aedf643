"""Sleeping boards' sessions in the hub (core/sleepers.py, docs/protocols/sleep.md), with a
fake clock and a fake board face: what is published for a board asleep is held, within
its bounds, and delivered in order through the acked path when it registers again; a
notify the board slept through goes first again; past its expiry the session ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hub_face import StubFace

from pubmote.core.hub import Hub, Message
from pubmote.core.limits import Limits
from pubmote_wire import control, interest, notify
from pubmote_wire import name as ndn_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Board(StubFace):
    """A board's face: awake, it acks each notify the hub sends (a loop turn later) and
    notes its topic; asleep, it hears nothing."""

    def __init__(self, hub: Hub, name: str = "b1", face_id: int = 3) -> None:
        super().__init__(face_id=face_id, kind="serial", label="serial:%s" % name)
        self.hub = hub
        self.name = name
        self.awake = True
        self.got: list[str] = []

    def send_packet(self, pkt: bytes) -> None:
        self.sent.append(pkt)
        if not self.awake or pkt[:1] != b"\x05":
            return
        try:
            topic = notify.parse_notify_interest(pkt)[0]
        except Exception:  # noqa: BLE001 - not a notify (the hello)
            return
        self.got.append(ndn_name.to_uri(bytes(topic)))
        nm = bytes(interest.decode_interest(pkt).name)
        ack = bytes(control.encode_ack(nm))
        asyncio.get_running_loop().call_soon(self.hub.on_packet, self, ack)

    def register(self, sleep_ms: int | None, boot: int = 1) -> None:
        params = control.register_params(self.name, "/pubmote/node/" + self.name, [b"/cmd/"],
                                         [], 0, boot, sleep_ms)
        buf = bytearray(300)
        n = control.encode_register(buf, 0, self.name.encode(), params, -1, 2000, None, None,
                                    None)
        self.hub.on_packet(self, bytes(buf[:n]))


def _hub(clock: Clock, **kw: int | float) -> tuple[Hub, Board]:
    hub = Hub(gateway="gw", timeout_ms=100, retries=2, sleep_clock_s=clock, **kw)  # type: ignore[arg-type]
    board = Board(hub)
    hub.face_state(board)
    return hub, board


def _cmd(k: int, size: int = 4) -> Message:
    return Message(b"/cmd/%d" % k, b"x" * size, "sp", "sp")


async def _until(pred: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def test_held_while_asleep_then_delivered_in_order() -> None:
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        hub.publish(_cmd(0))
        await _until(lambda: board.got == ["/cmd/0"], "the awake delivery")
        board.register(10_000)
        board.awake = False
        info = hub.board("b1")
        assert info is not None and info.asleep and not info.up
        assert info.wake_due == clock.now + 10
        for k in range(1, 6):
            hub.publish(_cmd(k))
        await asyncio.sleep(0.3)  # nothing may leave while it sleeps: give it the chance
        notifies = [p for p in board.sent if p[:1] == b"\x05"]
        assert len(notifies) == 1 + 1  # the hello and the one awake delivery
        assert hub.counters["sleep_queued"] == 5
        board.awake = True
        board.register(None, boot=2)  # it woke: a new start-up
        # (the board notes a message as its notify leaves, the hub counts it at the ack)
        await _until(lambda: hub.board("b1").counters["delivered"] == 6,  # type: ignore[union-attr]
                     "the held messages")
        assert board.got == ["/cmd/%d" % k for k in range(6)]
        info = hub.board("b1")
        assert info is not None and not info.asleep and info.up
        assert (hub.counters["sleeps"], hub.counters["wakes"]) == (1, 1)
        await hub.close()

    asyncio.run(run())


def test_queue_bounded_in_messages_and_bytes_oldest_dropped() -> None:
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock, sleep_queue_max=3, sleep_queue_bytes=10_000)
        board.register(None)
        board.register(5_000)
        board.awake = False
        for k in range(5):
            hub.publish(_cmd(k))
        assert hub.counters["sleep_dropped"] == 2
        board.awake = True
        board.register(None, boot=2)
        await _until(lambda: len(board.got) == 3, "the held messages")
        assert board.got == ["/cmd/2", "/cmd/3", "/cmd/4"]
        info = hub.board("b1")
        assert info is not None and info.counters["dropped"] == 2
        await hub.close()

        # bytes: each message costs topic + payload + 64; 350 B holds two of 170 B
        hub, board = _hub(clock, sleep_queue_max=100, sleep_queue_bytes=350)
        board.register(None)
        board.register(5_000)
        board.awake = False
        for k in range(4):
            hub.publish(_cmd(k, size=100))
        assert hub.counters["sleep_dropped"] == 2
        board.awake = True
        board.register(None, boot=2)
        await _until(lambda: len(board.got) == 2, "the held messages")
        assert board.got == ["/cmd/2", "/cmd/3"]
        await hub.close()

    asyncio.run(run())


def test_session_expires_past_its_due_time() -> None:
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock, session_expiry_s=5.0)
        board.register(None)
        board.register(1_000)
        board.awake = False
        hub.publish(_cmd(0))
        hub.publish(_cmd(1))
        clock.now += 1 + 4.9  # due back after 1 s, and 5 s of grace
        assert hub.sweep_sessions() == 0
        assert hub.board("b1") is not None
        clock.now += 0.2
        assert hub.sweep_sessions() == 1
        assert hub.board("b1") is None
        assert hub.counters["sessions_expired"] == 1 and hub.counters["sleep_expired"] == 2
        # forgotten: nothing is held for a name no longer registered
        hub.publish(_cmd(2))
        assert not hub.deliver("b1", _cmd(3))
        board.awake = True
        board.register(None, boot=2)  # back, late: a new session, nothing of the old
        hub.publish(_cmd(4))
        await _until(lambda: board.got == ["/cmd/4"], "a fresh delivery")
        await asyncio.sleep(0.2)
        assert board.got == ["/cmd/4"]
        await hub.close()

    asyncio.run(run())


def test_unknown_board_gets_nothing_queued() -> None:
    async def run() -> None:
        hub, _ = _hub(Clock())
        assert not hub.deliver("ghost", _cmd(0))
        hub.publish(_cmd(1))
        assert hub.board_names() == [] and hub.counters["sleep_queued"] == 0
        await hub.close()

    asyncio.run(run())


def test_notify_slept_through_goes_first_at_the_wake() -> None:
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        board.awake = False  # it fell asleep as the hub announced /cmd/0
        hub.publish(_cmd(0))
        await _until(lambda: any(p[:1] == b"\x05" and b"cmd" in p for p in board.sent),
                     "the notify out")
        board.register(2_000)  # the announcement reached the hub after the notify left
        hub.publish(_cmd(1))
        await _until(lambda: hub.counters["sleep_requeued"] == 1, "the notify to fail")
        info = hub.board("b1")
        assert info is not None and info.counters["deliver_failed"] == 0
        board.awake = True
        board.register(None, boot=2)
        await _until(lambda: len(board.got) == 2, "both messages")
        assert board.got == ["/cmd/0", "/cmd/1"]
        await hub.close()

    asyncio.run(run())


def _notify_nonces(board: Board) -> list[bytes]:
    out = []
    for p in board.sent:
        if p[:1] == b"\x05" and b"cmd" in p:
            out.append(bytes(notify.parse_notify_interest(p)[2]))
        # (the hello and the registration replies are not notifies)
    return out


def test_a_woken_board_alive_but_slow_gets_its_held_message_not_dropped() -> None:
    # it answers no notify for several rounds of retries (2 x 100 ms here) after its wake,
    # busy, but keeps registering: the held message is sent again, the same NotifyNonce
    # each time (a board that got it meanwhile knows it), and delivered once it answers
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        board.register(2_000)
        board.awake = False
        hub.publish(_cmd(0))
        board.register(None, boot=2)  # it woke, but answers no notify yet
        for _ in range(8):  # 0.8 s: four rounds
            await asyncio.sleep(0.1)
            board.register(None, boot=2)  # its keepalives
        assert hub.counters["sleep_retried"] >= 2
        info = hub.board("b1")
        assert info is not None and info.counters["deliver_failed"] == 0
        board.awake = True
        await _until(lambda: hub.board("b1").counters["delivered"] == 1,  # type: ignore[union-attr]
                     "the message, once it answers")
        assert board.got == ["/cmd/0"]
        nonces = _notify_nonces(board)
        assert len(nonces) >= 4 and len(set(nonces)) == 1, nonces  # past its 2 retries
        info = hub.board("b1")
        assert info is not None and info.counters["deliver_failed"] == 0
        await hub.close()

    asyncio.run(run())


def test_a_woken_board_gone_silent_is_given_up_on() -> None:
    # heard from no more after its wake: two rounds of silence, then the message fails as
    # for any board
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        board.register(2_000)
        board.awake = False
        hub.publish(_cmd(0))
        board.register(None, boot=2)
        await _until(lambda: hub.board("b1").counters["deliver_failed"] == 1,  # type: ignore[union-attr]
                     "the delivery to fail")
        assert 1 <= hub.counters["sleep_retried"] <= 2
        assert len(_notify_nonces(board)) <= 3 * 2
        await hub.close()

    asyncio.run(run())


def test_a_board_that_never_slept_is_not_waited_for() -> None:
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        board.awake = False  # alive (it registers) but answers no notify
        hub.publish(_cmd(0))
        for _ in range(4):
            await asyncio.sleep(0.1)
            board.register(None)
        await _until(lambda: hub.board("b1").counters["deliver_failed"] == 1,  # type: ignore[union-attr]
                     "the delivery to fail")
        assert hub.counters["sleep_retried"] == 0
        assert len(_notify_nonces(board)) == 2  # its retries, no more
        await hub.close()

    asyncio.run(run())


def test_nothing_more_sent_once_the_board_sleeps() -> None:
    # a notify unanswered when the board announces its sleep: no retry of it reaches the
    # sleeping board (an emulated Pico would wake early on the UART's bytes); it goes
    # first at the wake
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        board.register(None)
        board.awake = False
        hub.publish(_cmd(0))
        await _until(lambda: len(_notify_nonces(board)) == 1, "the notify out")
        board.register(2_000)
        await _until(lambda: hub.counters["sleep_requeued"] == 1, "the notify to fail")
        assert len(_notify_nonces(board)) == 1
        await hub.close()

    asyncio.run(run())


def test_wake_registration_runs_register_hooks_with_the_new_start_up() -> None:
    # retained topics (gateway/retained.py) hand their last values to a board through a
    # register hook, once per start-up: a board back from deep sleep has a new boot number,
    # so it is handed them again, after what was held for it
    async def run() -> None:
        clock = Clock()
        hub, board = _hub(clock)
        boots: list[int | None] = []

        def hand_last(b: object) -> None:
            boots.append(getattr(b, "boot", None))
            if getattr(b, "boot", None) == 2:
                hub.deliver("b1", Message(b"/cmd/retained", b"last", "dht", "dht"))

        hub.add_register_hook(hand_last)
        board.register(None)
        board.register(1_000)
        board.awake = False
        hub.publish(_cmd(0))
        board.awake = True
        board.register(None, boot=2)
        await _until(lambda: len(board.got) == 2, "the held and the retained message")
        assert board.got == ["/cmd/0", "/cmd/retained"]
        assert boots == [1, 1, 2]
        await hub.close()

    asyncio.run(run())


def test_a_full_table_forgets_a_sleeping_board_last() -> None:
    async def run() -> None:
        limits = Limits()
        limits.max_boards = 2
        hub = Hub(gateway="gw", timeout_ms=100, retries=2, sleep_clock_s=Clock(),
                  limits=limits)
        sleeper, other = Board(hub, "b1", 3), Board(hub, "b2", 4)
        for face in (sleeper, other):
            hub.face_state(face)
            face.register(None)
        sleeper.register(60_000)  # a WiFi board asleep: its link closes
        sleeper.up = False
        hub.face_state(sleeper)
        other.up = False  # down after it, so not the longest down
        hub.face_state(other)
        hub.publish(_cmd(0))
        newcomer = Board(hub, "b3", 5)
        hub.face_state(newcomer)
        newcomer.register(None)
        assert sorted(hub.board_names()) == ["b1", "b3"]
        assert hub.counters["boards_evicted"] == 1 and hub.counters["sleep_queued"] == 1
        await hub.close()

    asyncio.run(run())


class _Item:
    """A retained topic's last value as the DHT overlay holds it (what the hook reads)."""

    key = bytes(32)
    seq = 1

    def value(self) -> bytes:
        return b"last"


class _Overlay:
    item = _Item()


def test_retained_last_values_handed_over_at_the_wake() -> None:
    # the bridge's retained topics (gateway/retained.py, its DHT node not started) hand a
    # board their last values once per start-up: at the wake (a new boot), after what was
    # held, and not again at a keepalive of the same start-up
    from pubmote.dht.bep44 import KeyPair
    from pubmote.gateway.retained import RetainedTopics

    async def run() -> None:
        hub, board = _hub(Clock())
        rt = RetainedTopics(hub, ["/cmd/r"], key=KeyPair(bytes(range(32))))
        rt.overlays[b"/cmd/r"] = _Overlay()  # type: ignore[assignment]
        hub.add_register_hook(rt._on_register)
        board.register(None, boot=1)
        await _until(lambda: board.got == ["/cmd/r"], "the first hand-over")
        board.register(1_000, boot=1)
        board.awake = False
        hub.publish(_cmd(0))
        board.awake = True
        board.register(None, boot=2)
        await _until(lambda: len(board.got) == 3, "the held message and the last value")
        assert board.got == ["/cmd/r", "/cmd/0", "/cmd/r"]
        board.register(None, boot=2)  # a keepalive: nothing handed twice
        await asyncio.sleep(0.2)
        assert len(board.got) == 3 and rt.counters["given_to_boards"] == 2
        await hub.close()

    asyncio.run(run())
