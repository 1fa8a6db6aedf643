"""`pubmote firmware build`: one-line errors for what is missing (nothing half-built), the
cache (an unchanged second build copies), and the emulated Pico's filesystem image."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pubmote.boards import fwbuild, uf2
from pubmote.boards.emu import FS_BLOCK, FS_BYTES, LFS2_DISK_VERSION, make_fs_image


def test_missing_tree_says_what_to_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MICROPY_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(fwbuild.BuildError) as e:
        fwbuild.build("pico", out=tmp_path / "out", progress=lambda line: None)
    assert "--micropython DIR" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_missing_toolchain_gives_the_install_line(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler, no cmake, no make
    with pytest.raises(fwbuild.BuildError) as e:
        fwbuild.build("pico", out=tmp_path / "out", progress=lambda line: None)
    msg = str(e.value)
    assert "apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi cmake" in msg, msg
    assert not (tmp_path / "out").exists()


def test_esp32_needs_esp_idf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IDF_PATH", raising=False)
    with pytest.raises(fwbuild.BuildError) as e:
        fwbuild.build("esp32", out=tmp_path / "out", progress=lambda line: None)
    assert "ESP-IDF" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_pico_w_needs_the_wifi_driver(tmp_path: Path) -> None:
    if not (fwbuild.SHARED_RP2040 / fwbuild.TARBALL_NAME).is_file():
        pytest.fail("the MicroPython tarball is missing from %s" % fwbuild.SHARED_RP2040)
    with pytest.raises(fwbuild.BuildError) as e:
        fwbuild.build("pico_w", out=tmp_path / "out", progress=lambda line: None)
    assert "cyw43" in str(e.value)
    assert not (tmp_path / "out").exists()


# make test builds the firmware beside the tests: these wait for that build when it is
# still running, which on a loaded machine takes minutes
BUILD_WAIT_S = 900


@pytest.mark.timeout(BUILD_WAIT_S)
def test_unchanged_build_comes_from_the_cache(tmp_path: Path) -> None:
    fwbuild.build("pico", progress=lambda line: None)  # built (or waited for) once
    lines: list[str] = []
    t0 = time.monotonic()
    out = fwbuild.build("pico", out=tmp_path / "fw", progress=lines.append)
    assert time.monotonic() - t0 < 10, lines
    assert any("up to date" in line for line in lines), lines
    image = (out / "firmware.bin").read_bytes()
    assert len(image) > 100_000
    # the UF2 holds firmware.bin at the start of flash, as the boot ROM takes it
    start, flashed = uf2.to_bin((out / "firmware.uf2").read_bytes())
    assert start == uf2.FLASH_BASE and flashed[:len(image)] == image
    key = (out / "inputs.sha256").read_text().strip()
    toolchain = fwbuild.check_toolchain()
    _, tree_id = fwbuild.resolve_tree(None, lambda line: None)
    assert key == fwbuild.inputs_key("pico", tree_id, toolchain)
    # every input counts: another board or compiler is another key
    assert fwbuild.inputs_key("pico_w", tree_id, toolchain) != key
    assert fwbuild.inputs_key("pico", tree_id, toolchain + " ") != key


def test_fs_image_reads_back_with_littlefs(tmp_path: Path) -> None:
    from littlefs import LittleFS

    files = {"/pubmote_config.json": b'{"name": "p1"}', "/lib/app.py": b"x = 1\n"}
    img = make_fs_image(files, tmp_path / "fs.lfs").read_bytes()
    assert len(img) % FS_BLOCK == 0 and len(img) <= FS_BYTES
    whole = bytearray(img + b"\xff" * (FS_BYTES - len(img)))  # the rest of flash: erased
    fs = LittleFS(block_size=FS_BLOCK, block_count=FS_BYTES // FS_BLOCK, read_size=32,
                  prog_size=256, lookahead_size=32, disk_version=LFS2_DISK_VERSION,
                  mount=False)
    fs.context.buffer[:] = whole
    fs.mount()
    for path, want in files.items():
        with fs.open(path, "rb") as f:
            assert f.read() == want


@pytest.mark.timeout(BUILD_WAIT_S)
def test_flash_pico_copies_the_built_uf2(tmp_path: Path) -> None:
    import subprocess
    import sys

    built = fwbuild.build("pico", progress=lambda line: None) / "firmware.uf2"
    drive = tmp_path / "RPI-RP2"
    drive.mkdir()
    (drive / "INFO_UF2.TXT").write_text("UF2 Bootloader v3.0\nBoard-ID: RPI-RP2\n")
    p = subprocess.run([str(Path(sys.executable).parent / "pubmote"), "flash", "--board", "pico"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PUBMOTE_UF2_DRIVE=str(drive)))
    assert p.returncode == 0, p.stderr
    assert (drive / "firmware.uf2").read_bytes() == built.read_bytes()


def test_an_app_is_frozen_by_its_own_manifest(tmp_path: Path) -> None:
    """build(apps=...): the app's modules staged beside pubmote's sources with a manifest
    that includes pubmote's and freezes them; another key, so another cache entry and
    another output folder, and the plain firmware's key unchanged."""
    app = tmp_path / "my_app.py"
    app.write_text("async def main(node):\n    pass\n")
    manifest = fwbuild.stage_sources(tmp_path / "stage", [app])
    assert manifest == tmp_path / "stage" / fwbuild.APP_MANIFEST_NAME
    assert (tmp_path / "stage" / "app" / "my_app.py").read_text() == app.read_text()
    text = manifest.read_text()
    assert 'include("manifest.py")' in text
    assert 'module("my_app.py", base_path="../app")' in text
    # without apps: the same manifest name (cmake's build folder is shared), only pubmote's
    plain = fwbuild.stage_sources(tmp_path / "plain")
    assert plain == tmp_path / "plain" / fwbuild.APP_MANIFEST_NAME
    assert "module(" not in plain.read_text() and 'include("manifest.py")' in plain.read_text()
    assert not (tmp_path / "plain" / "app").exists()
    key = fwbuild.inputs_key("pico", "tree", "gcc")
    with_app = fwbuild.inputs_key("pico", "tree", "gcc", [app])
    assert with_app != key and fwbuild.inputs_key("pico", "tree", "gcc", ()) == key
    app.write_text("async def main(node):\n    return 1\n")  # the app's code is an input
    assert fwbuild.inputs_key("pico", "tree", "gcc", [app]) != with_app


def test_an_app_must_be_a_python_file(tmp_path: Path) -> None:
    with pytest.raises(fwbuild.BuildError) as e:
        fwbuild.build("pico", apps=[tmp_path / "missing.py"], progress=lambda line: None)
    assert "missing.py" in str(e.value)
