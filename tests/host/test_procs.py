"""pubmote.procs: the processes below a PID, their resident memory, and a Ctrl-C held back
while a child starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pubmote import procs


def test_a_ctrl_c_inside_the_block_is_raised_after_it() -> None:
    ran_to_the_end = False
    with pytest.raises(KeyboardInterrupt):
        with procs.interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            # the handler has run by now (a signal is handled between bytecodes)
            for _ in range(1000):
                pass
            ran_to_the_end = True
    assert ran_to_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_ctrl_c_no_exception_and_the_handler_is_given_back() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with procs.interrupt_after():
            pass
        assert seen == []
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_held_ctrl_c_goes_to_the_handler_that_was_there() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with procs.interrupt_after():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            assert seen == []
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_descendants_lists_grandchildren_and_cmdline_names_them() -> None:
    p = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run("
                          "['sleep', '60']); sys.exit(0)"])
    try:
        deadline = time.monotonic() + 30
        while True:
            found = procs.descendants(p.pid)
            if found and any("sleep 60" in procs.cmdline(c) for c in found):
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        assert procs.children(p.pid) == found[:1]
    finally:
        for c in procs.descendants(p.pid):
            os.kill(c, signal.SIGKILL)
        p.kill()
        p.wait(10)
    assert procs.cmdline(p.pid) == ""


def test_status_kb_follows_a_process_and_is_none_once_it_is_gone() -> None:
    before = procs.status_kb("VmRSS", os.getpid())
    assert before is not None
    ballast = bytearray(64 * 1024 * 1024)  # 64 MiB, every page touched below
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    assert (procs.status_kb("VmRSS") or 0) >= before + 60 * 1024  # "self" too
    del ballast
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert procs.status_kb("VmRSS", p.pid) is None  # reaped: no /proc entry
