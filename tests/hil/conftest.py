"""HIL options: without them the suite runs against the simulated board; with
--board-port PORT --board TYPE (make hil PORT=... BOARD=...) against a real one."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("pubmote HIL")
    g.addoption("--board-port", help="a real board's REPL serial port (e.g. /dev/ttyUSB0)")
    g.addoption("--board", default="esp32", help="the real board's type: esp32 or rp2040")
    g.addoption("--bridge-port", help="the real board's link to the bridge, if not the REPL "
                                      "port (a UART adapter for an ESP32 on its UART link)")
