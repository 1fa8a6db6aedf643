# Cases for the durable outbox's log (firmware/pubmote_node/outlog.py), written to run on
# CPython (test_outlog.py runs each under pytest) and unchanged on the MicroPython unix port
# (`micropython outlog_cases.py DIR`, runner.py's RESULT line): append and replay, a torn
# tail, acks removing segments, the flash bound, an added field, the outbox over the log.
import os
import sys

from pubmote_node.outlog import OutLog

TMP = ["/tmp"]  # the directory the cases make their logs in (argv[1] on MicroPython)
COUNT = [0]

TOPIC = b"/pubmote/demo/b1/temperature"


def _fresh():
    COUNT[0] += 1
    d = "%s/log%d" % (TMP[0], COUNT[0])
    _rmtree(d)
    return d


def _rmtree(d):
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        os.remove(d + "/" + n)
    os.rmdir(d)


def _segs(d):
    return sorted(int(n) for n in os.listdir(d))


def _size(d):
    total = 0
    for n in os.listdir(d):
        total += os.stat(d + "/" + n)[6]
    return total


def _msg(i):
    return b"%04d" % i


def _reopen(d):
    log = OutLog(d)
    return log, log.replay()


def test_appended_messages_come_back_in_order_after_a_reboot():
    d = _fresh()
    log, got = _reopen(d)
    assert got == []
    for i in range(30):
        assert log.append((TOPIC, _msg(i)))
    log, got = _reopen(d)  # the reboot: a new log object over the same files
    assert got == [[TOPIC, _msg(i)] for i in range(30)]
    assert len(_segs(d)) > 1  # 30 records of 49 bytes pass one 512-byte segment


def test_messages_that_left_are_not_replayed():
    d = _fresh()
    log, _ = _reopen(d)
    for i in range(10):
        log.append((TOPIC, _msg(i)))
    for _ in range(4):
        log.done()
    log.append((TOPIC, _msg(10)))  # carries the cursor: 0..3 have left
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(i)] for i in range(4, 11)]
    # the replayed ones leave one by one, then new ones follow
    log.done()
    log.done()
    log.append((TOPIC, _msg(11)))
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(i)] for i in range(6, 12)]


def test_a_message_done_after_the_last_record_is_sent_again():
    # at least once: a cursor moved after the last write is not on flash
    d = _fresh()
    log, _ = _reopen(d)
    log.append((TOPIC, _msg(0)))
    log.done()
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(0)]]


def test_a_torn_tail_is_skipped_and_not_appended_after():
    d = _fresh()
    log, _ = _reopen(d)
    for i in range(5):
        log.append((TOPIC, _msg(i)))
    seg = "%s/%d" % (d, _segs(d)[-1])
    with open(seg, "rb") as f:
        whole = f.read()
    rec = len(whole) // 5
    for cut in (1, 2, 10, rec - 1):  # a power cut anywhere in the last record
        with open(seg, "wb") as f:
            f.write(whole[0 : len(whole) - cut])
        log, got = _reopen(d)
        assert got == [[TOPIC, _msg(i)] for i in range(4)], cut
    # a record whose bytes were not all programmed (its CRC fails) ends the segment too
    bad = bytearray(whole)
    bad[len(bad) - rec + 14] ^= 0x40
    with open(seg, "wb") as f:
        f.write(bad)
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(i)] for i in range(4)]
    log.append((TOPIC, _msg(5)))  # into a new segment, never after the torn record
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(i)] for i in (0, 1, 2, 3, 5)]
    for _ in range(5):  # the replayed ones leave, seqs with a gap and all
        log.done()
    log.append((TOPIC, _msg(6)))
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(6)]]


def test_garbage_files_hold_nothing_and_go():
    d = _fresh()
    os.mkdir(d)
    with open(d + "/3", "wb") as f:
        f.write(b"\xff" * 40)  # erased flash
    with open(d + "/4", "wb") as f:
        f.write(b"\x00\x00\x01")
    with open(d + "/notes", "wb") as f:
        f.write(b"not a segment")
    log, got = _reopen(d)
    assert got == []
    assert _segs_only(d) == []
    log.append((TOPIC, _msg(1)))
    assert _segs_only(d) == [5]  # numbered after the highest seen


def _segs_only(d):
    return sorted(int(n) for n in os.listdir(d) if n.isdigit())


def test_segments_go_once_their_messages_left_so_the_log_stays_bounded():
    # a connected board: every message acked at once; the log never holds more than two
    # segments, however many messages pass
    d = _fresh()
    log, _ = _reopen(d)
    for i in range(500):
        log.append((TOPIC, _msg(i)))
        log.done()
        assert len(os.listdir(d)) <= 2
        assert _size(d) <= 2 * 512
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(499)]]  # its ack came after the last write


def test_an_outage_holds_only_what_the_outbox_holds():
    # 64 messages held (the outbox drops its oldest beyond that: done()), 300 taken
    d = _fresh()
    log, _ = _reopen(d)
    held = 0
    for i in range(300):
        if held == 64:  # the outbox makes room first, then logs the new one
            log.done()
            held -= 1
        log.append((TOPIC, _msg(i)))
        held += 1
    rec = 2 + 4 + 4 + 1 + 2 + len(TOPIC) + 2 + 4 + 2
    assert _size(d) <= 64 * rec + 2 * 512
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(i)] for i in range(236, 300)]


def test_an_added_field_is_carried_and_old_readers_take_the_first_two():
    d = _fresh()
    log, _ = _reopen(d)
    log.append((TOPIC, b"old"))
    log.append((TOPIC, b"new", b"\x00\x00\x01\x8c\xa1\x2b\x3c\x4d"))  # e.g. a taken-time
    log.append((b"", b""))
    log, got = _reopen(d)
    assert got == [[TOPIC, b"old"], [TOPIC, b"new", b"\x00\x00\x01\x8c\xa1\x2b\x3c\x4d"],
                   [b"", b""]]
    assert [f[0:2] for f in got][1] == [TOPIC, b"new"]


def test_a_big_message_gets_a_segment_of_its_own():
    d = _fresh()
    log, _ = _reopen(d)
    log.append((TOPIC, _msg(0)))
    big = bytes(range(256)) * 4
    log.append((TOPIC, big))
    log.append((TOPIC, _msg(2)))
    assert len(_segs(d)) == 3
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(0)], [TOPIC, big], [TOPIC, _msg(2)]]


def test_a_failing_filesystem_is_reported_and_the_log_carries_on():
    d = _fresh()
    log, _ = _reopen(d)
    log.append((TOPIC, _msg(0)))
    log._dir = d + "/missing"  # every open fails
    assert not log.append((TOPIC, _msg(1)))
    log._dir = d
    assert log.append((TOPIC, _msg(2)))
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(0)], [TOPIC, _msg(2)]]
    log.done()
    log.done()  # the seq that was never written leaves as well: the cursor stays in step
    log.append((TOPIC, _msg(3)))
    log, got = _reopen(d)
    assert got == [[TOPIC, _msg(3)]]


class _Session:
    connected = False  # the bridge away: the drain task waits, nothing leaves

    def __init__(self):
        from pubmote_node.clock import Clock

        self.clock = Clock()


class _Node:
    """What an Outbox uses of a Node."""

    def __init__(self, config):
        self.name = "b1"
        self.config = config
        self.counters = {"soft_full": 0}
        self.session = _Session()


def _payloads(ob):
    return [ob._q[i] for i in range(1, len(ob._q), 2)]


def test_the_outbox_over_the_log_starts_with_what_a_reboot_left():
    import asyncio

    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    cfg = {"outbox_dir": d, "outbox_len": 8}

    async def outage(ob, first, n):
        for i in range(first, first + n):
            ob.put("/t", _msg(i), 0)
        await asyncio.sleep(0)

    node = _Node(cfg)
    ob = Outbox(node, None)
    assert len(ob) == 0 and node.counters["outbox_log_failed"] == 0
    asyncio.run(outage(ob, 0, 12))
    assert node.counters["outbox_dropped"] == 4
    node = _Node(cfg)
    ob = Outbox(node, None)  # the reboot
    assert len(ob) == 8 and ob._q[0] == "/t" and _payloads(ob) == [_msg(i) for i in range(4, 12)]
    assert ob._q[0] is ob._q[-2]  # one topic object shared
    ob._pop()  # acked
    asyncio.run(outage(ob, 12, 1))
    ob = Outbox(_Node(cfg), None)
    assert _payloads(ob) == [_msg(i) for i in range(5, 13)]
    # a smaller outbox after the reboot: the oldest dropped and counted
    node = _Node({"outbox_dir": d, "outbox_len": 3})
    ob = Outbox(node, None)
    assert _payloads(ob) == [_msg(i) for i in range(10, 13)]
    assert node.counters["outbox_dropped"] == 5


def test_a_reading_keeps_its_time_through_a_reboot():
    # its record carries the time itself (ticks mean nothing after a reboot), made ticks
    # again once the new boot's clock is synced; one taken before any sync has none
    import asyncio

    from pubmote_node.clock import ticks_ms
    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    gw = 1700000000000  # the gateway's clock, ms since 1970

    async def publish(ob, i, stamp):
        ob.put("/t", _msg(i), stamp)
        await asyncio.sleep(0)

    node = _Node({"outbox_dir": d})
    ob = Outbox(node, None)
    asyncio.run(publish(ob, 0, ticks_ms()))  # before the clock was synced
    t = ticks_ms()
    node.session.clock.sync(gw, t, t)
    taken = node.session.clock.ms(t)
    asyncio.run(publish(ob, 1, t))
    node = _Node({"outbox_dir": d})
    ob = Outbox(node, None)  # the reboot
    assert _payloads(ob) == [_msg(0), _msg(1)]
    assert ob._stamps[0] is None and len(ob._stamps[1]) == 8
    clock = node.session.clock
    assert clock.stamp_of(ob._stamps[1]) is None  # not synced yet
    t2 = ticks_ms()
    clock.sync(gw + 5000, t2, t2)  # the new boot registered, 5 s later by the gateway
    assert clock.ms(clock.stamp_of(ob._stamps[1])) == taken
    far = bytearray(clock.value(t2))
    far[2] ^= 0x40  # some 2**46 ms away: no ticks reach it
    assert clock.stamp_of(far) is None


def test_an_outbox_dir_that_cannot_be_made_leaves_the_outbox_in_ram():
    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    node = _Node({"outbox_dir": _fresh() + "/no/such/dir"})
    ob = Outbox(node, None)
    assert ob._log is None and node.counters["outbox_log_failed"] == 1
    ob._hold("/t", _msg(0), 0)
    assert len(ob) == 1



def _drains_in_order(ob, first, end):
    # what the drain sends, head by head as each is acked, is _msg(first), ... up to end
    # (checked as it goes: a list of them would fragment the heap it is checking)
    i = first
    while len(ob):
        if ob._q[1] != _msg(i):
            return False
        ob._pop()
        ob._refill()
        i += 1
    return i == end


def test_past_its_ram_bounds_the_durable_outbox_keeps_messages_on_flash():
    # outbox_log_bytes: the RAM holds the oldest 8, the rest wait in the log (a long
    # outage's readings, more than the heap holds), none dropped; through a reboot too,
    # and all sent in order. A message on flash only keeps its ticks while the boot lasts
    import asyncio

    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    cfg = {"outbox_dir": d, "outbox_len": 8, "outbox_log_bytes": 32768}

    async def outage(ob, first, n):
        for i in range(first, first + n):
            ob.put("/t", _msg(i), 1000 + i)
        await asyncio.sleep(0)

    node = _Node(cfg)
    ob = Outbox(node, None)
    asyncio.run(outage(ob, 0, 300))
    assert len(ob) == 300 and _payloads(ob) == [_msg(i) for i in range(8)]
    assert node.counters["outbox_dropped"] == 0
    ob._pop()
    ob._refill()  # the head acked: the next from flash, with its ticks
    assert _payloads(ob) == [_msg(i) for i in range(1, 9)] and ob._stamps[-1] == 1008
    node = _Node(cfg)
    ob = Outbox(node, None)  # the reboot (the head acked after the last write: again)
    assert len(ob) == 300 and _payloads(ob) == [_msg(i) for i in range(8)]
    asyncio.run(outage(ob, 300, 5))
    assert _drains_in_order(ob, 0, 305)
    assert node.counters["outbox_dropped"] == 0
    # the flash bound: the oldest dropped and counted, the log kept within it
    d = _fresh()
    cfg["outbox_dir"] = d
    node = _Node(cfg)
    ob = Outbox(node, None)
    assert len(ob) == 0
    n = 2500
    asyncio.run(outage(ob, 0, n))
    dropped = node.counters["outbox_dropped"]
    assert dropped > 0 and len(ob) + dropped == n and _size(d) <= 32768
    assert _drains_in_order(ob, dropped, n)


def _alloc():
    import gc

    gc.collect()
    return gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0  # (CPython: not counted)


def test_a_long_outage_on_flash_costs_the_heap_nothing_per_segment():
    # 3,000 messages on flash only, two to a segment: the log keeps no list of its
    # segments (on a fragmented board such a list's growth found no block: MemoryError in
    # the app's publish, 10 minutes into an outage)
    import asyncio

    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    cfg = {"outbox_dir": d, "outbox_len": 8, "outbox_log_bytes": 2000000}
    big = bytes(200)

    async def outage(ob, first, n):
        for i in range(first, first + n):
            ob.put("/t", _msg(i) + big, 1000 + i)
        await asyncio.sleep(0)

    node = _Node(cfg)
    ob = Outbox(node, None)
    asyncio.run(outage(ob, 0, 100))
    base = _alloc()
    asyncio.run(outage(ob, 100, 3000))
    assert _alloc() - base < 4096
    assert len(ob) == 3100 and node.counters["outbox_dropped"] == 0
    assert ob._log.size() >= 1500 * 512
    node = _Node(cfg)
    ob = Outbox(node, None)  # the reboot
    assert len(ob) == 3100 and node.counters["outbox_dropped"] == 0
    assert ob._q[1] == _msg(0) + big


def test_a_log_larger_than_the_heap_is_taken_in_as_it_is_read():
    # bounds set for a long outage, a reboot: the log (2,000 readings, ~180 kB) is more
    # than the unix port's 256 kB heap holds beside the outbox's copy; read whole it was
    # a MemoryError at every boot. Taken in record by record, the heap is the bound: the
    # oldest dropped and counted, the newest held in order (on CPython all of them)
    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    log = OutLog(d)
    log.replay()
    n = 2000
    for i in range(n):
        assert log.append((TOPIC, _msg(i) + bytes(56), b"\x00\x00\x01\x9a\xbc\xde\xf0\x12"))
    log = None
    node = _Node({"outbox_dir": d, "outbox_len": 100000, "outbox_bytes": 100000000})
    ob = Outbox(node, None)
    held = len(ob)  # (checked in place: the heap has no room for a list of them)
    assert held + node.counters["outbox_dropped"] == n and held >= 100
    for k in range(held):
        assert ob._q[2 * k + 1] == _msg(n - held + k) + bytes(56)
    assert node.counters["outbox_log_failed"] == 0


def test_name_in_the_outbox_dir_is_the_boards():
    from pubmote_node.outbox_durable import DurableOutbox as Outbox

    d = _fresh()
    os.mkdir(d)
    node = _Node({"outbox_dir": d + "/{name}"})
    Outbox(node, None)
    assert os.listdir(d) == ["b1"] and node.counters["outbox_log_failed"] == 0


if __name__ == "__main__":
    import runner

    if len(sys.argv) > 1:
        TMP[0] = sys.argv[1]
    sys.exit(1 if runner.main(globals(), "outlog_cases") else 0)
