"""`pubmote flash` without hardware: every error a user meets is one line with a hint, in
bounded time; the RP2040 path copies the UF2 to a BOOTSEL drive."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def _flash(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PUBMOTE, "flash", *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture
def firmware(tmp_path: Path) -> Path:
    f = tmp_path / "ESP32_GENERIC.bin"
    f.write_bytes(b"\xe9" + bytes(4095))
    return f


def test_no_port(firmware: Path) -> None:
    p = _flash("--board", "esp32", "--port", "/dev/ttyNOPE9", "--firmware", str(firmware))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "no such port" in p.stderr
    assert "mpremote devs" in p.stderr


def test_missing_firmware_and_unknown_board(tmp_path: Path) -> None:
    master, slave = pty.openpty()  # a serial line, so that the firmware is what is wrong
    try:
        port = os.ttyname(slave)
        p = _flash("--board", "esp32", "--port", port, "--firmware", str(tmp_path / "x.bin"))
        assert p.returncode == 2 and "--firmware %s: no such file" % (tmp_path / "x.bin") \
            in p.stderr, p.stderr
        p = _flash("--board", "stm32", "--port", port, "--firmware", str(tmp_path / "x.bin"))
        assert p.returncode == 2 and "--board stm32: not a board to flash" in p.stderr
    finally:
        os.close(master)
        os.close(slave)


def test_board_that_does_not_answer(firmware: Path) -> None:
    # a pty nobody answers on: esptool's sync fails, we say what to do about it
    master, slave = pty.openpty()
    try:
        p = _flash("--board", "esp32", "--port", os.ttyname(slave), "--firmware",
                   str(firmware), "--connect-attempts", "1")
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 1
    assert "did not answer" in p.stderr and "BOOT" in p.stderr, p.stderr


def test_rp2040_uf2_to_bootsel_drive(tmp_path: Path) -> None:
    drive = tmp_path / "RPI-RP2"
    drive.mkdir()
    (drive / "INFO_UF2.TXT").write_text("UF2 Bootloader v3.0\nBoard-ID: RPI-RP2\n")
    uf2 = tmp_path / "RPI_PICO.uf2"
    uf2.write_bytes(bytes(range(256)) * 1024)
    env = dict(os.environ, PUBMOTE_UF2_DRIVE=str(drive))
    p = _flash("--board", "rp2040", "--firmware", str(uf2), env=env)
    assert p.returncode == 0, p.stderr
    assert (drive / "RPI_PICO.uf2").read_bytes() == uf2.read_bytes()
    assert "100%" in p.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    p = _flash("--board", "rp2040", "--firmware", str(uf2),
               env=dict(os.environ, PUBMOTE_UF2_DRIVE=str(empty)))
    assert p.returncode == 1 and "BOOTSEL" in p.stderr


def test_deploy_errors_are_one_line_in_bounded_time() -> None:
    # --timeout also bounds the wait for a port that is re-enumerating after a reset
    p = subprocess.run([PUBMOTE, "deploy", "--board", "esp32", "--port", "/dev/ttyNOPE9",
                        "--name", "x", "--timeout", "1"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "no such port" in p.stderr
    master, slave = pty.openpty()
    try:
        p = subprocess.run([PUBMOTE, "deploy", "--board", "esp32", "--port", os.ttyname(slave),
                            "--name", "x", "--timeout", "1"], capture_output=True, text=True,
                           timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 1 and "did not answer within 1 s" in p.stderr
    assert p.stderr.count("\n") == 1
