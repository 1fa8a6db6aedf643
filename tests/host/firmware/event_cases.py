# Cases for the board's Event and wait_ms (firmware/pubmote_node/face.py: its own Event on
# MicroPython, over asyncio's scheduler; asyncio.Event and a timer task on CPython),
# written to run on CPython (test_event.py runs each under pytest) and unchanged on the
# MicroPython unix port (`micropython event_cases.py`, runner.py's RESULT line): a set
# before, during and after a wait, a timeout, a cancel at every point of a wait, many
# waiters, and no heap kept per wait. Times are the board's ticks; a deadline is 10 s, so
# "woken early" is told from "timed out" however loaded the machine is.
import asyncio
import gc
import sys

from pubmote_node.clock import ticks_diff, ticks_ms
from pubmote_node.face import Event, wait_ms

LONG_MS = 10000  # a timeout no case should reach: reaching it means a lost wake-up


def _run(coro):
    return asyncio.run(coro)


async def _set_soon(ev, ms=20):
    await asyncio.sleep_ms(ms) if hasattr(asyncio, "sleep_ms") else await asyncio.sleep(ms / 1000)
    ev.set()


def test_set_before_the_wait_returns_at_once():
    async def main():
        ev = Event()
        ev.set()
        t0 = ticks_ms()
        await wait_ms(ev, LONG_MS)
        assert ticks_diff(ticks_ms(), t0) < LONG_MS // 2
        await ev.wait()  # and a plain wait too
        assert ev.is_set()

    _run(main())


def test_set_during_a_timed_wait_wakes_it_early():
    async def main():
        for _ in range(5):
            ev = Event()
            setter = asyncio.create_task(_set_soon(ev))
            t0 = ticks_ms()
            await wait_ms(ev, LONG_MS)
            assert ev.is_set()
            assert ticks_diff(ticks_ms(), t0) < LONG_MS // 2
            await setter

    _run(main())


def test_a_timed_wait_ends_at_its_timeout_unset():
    async def main():
        ev = Event()
        t0 = ticks_ms()
        await wait_ms(ev, 50)
        # (whether the Event is set then is not said: CPython's timer task sets it, the
        # board's wait leaves it; callers look at what they waited for, not at it)
        assert ticks_diff(ticks_ms(), t0) >= 40  # its timeout (asyncio may round a little early)
        # a set after the timeout leaves the Event set for the next wait
        ev.set()
        await wait_ms(ev, LONG_MS)
        assert ev.is_set()

    _run(main())


def test_clear_makes_the_next_wait_wait():
    async def main():
        ev = Event()
        ev.set()
        ev.clear()
        assert not ev.is_set()
        t0 = ticks_ms()
        await wait_ms(ev, 50)
        assert ticks_diff(ticks_ms(), t0) >= 40

    _run(main())


def _cancel_case(set_too):
    # a task in a timed wait, cancelled (and its Event set in the same step, or not): it
    # ends with CancelledError, never as if woken; a later set wakes nothing
    async def main():
        ev = Event()
        ended = []

        async def waiter():
            try:
                await wait_ms(ev, LONG_MS)
                ended.append("woken")
            except asyncio.CancelledError:
                ended.append("cancelled")
                raise

        t = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # the waiter is in its wait
        await asyncio.sleep(0)
        t.cancel()
        if set_too:
            ev.set()
        try:
            await t
        except asyncio.CancelledError:
            pass
        assert ended == ["cancelled"], ended
        ev.set()
        await asyncio.sleep(0)
        assert ended == ["cancelled"], ended

    _run(main())


def test_a_cancelled_timed_wait_ends_cancelled():
    _cancel_case(False)


def test_a_timed_wait_cancelled_and_set_at_once_ends_cancelled():
    _cancel_case(True)


def test_set_wakes_every_plain_waiter_and_a_cancelled_one_stays_out():
    async def main():
        ev = Event()
        woken = []

        async def waiter(i):
            await ev.wait()
            woken.append(i)

        tasks = [asyncio.create_task(waiter(i)) for i in range(5)]
        await asyncio.sleep(0)
        tasks[2].cancel()
        await asyncio.sleep(0)
        ev.set()
        for i, t in enumerate(tasks):
            try:
                await t
            except asyncio.CancelledError:
                assert i == 2
        assert sorted(woken) == [0, 1, 3, 4], woken

    _run(main())


def test_a_timed_and_plain_waiters_on_one_event_all_wake():
    async def main():
        ev = Event()
        woken = []

        async def plain():
            await ev.wait()
            woken.append("plain")

        p = asyncio.create_task(plain())
        s = asyncio.create_task(_set_soon(ev))
        t0 = ticks_ms()
        await wait_ms(ev, LONG_MS)
        assert ticks_diff(ticks_ms(), t0) < LONG_MS // 2
        await p
        await s
        assert woken == ["plain"]

    _run(main())


def test_waits_keep_no_heap():
    # many timed waits, woken and timed out: the heap after them is what it was (a task,
    # closure or queue entry kept per wait would grow it by tens of bytes each)
    async def rounds(n):
        for i in range(n):
            ev = Event()
            if i % 2:
                s = asyncio.create_task(_set_soon(ev, 1))
                await wait_ms(ev, LONG_MS)
                await s
            else:
                await wait_ms(ev, 1)

    async def main():
        await rounds(20)  # what the first waits make for good (the scheduler's tables)
        gc.collect()
        before = gc.mem_alloc() if hasattr(gc, "mem_alloc") else None
        await rounds(200)
        gc.collect()
        if before is not None:  # MicroPython: the board's heap
            assert gc.mem_alloc() - before < 1024, gc.mem_alloc() - before

    _run(main())


if __name__ == "__main__":
    import runner

    sys.exit(1 if runner.main(globals(), "event_cases") else 0)
