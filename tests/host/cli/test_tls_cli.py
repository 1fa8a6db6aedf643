"""TLS for WiFi boards at the command line: `pubmote tls init/show`, the bridge's TLS flags
and keys checked before anything binds (one line each), and `pubmote deploy
--gateway-cert` installing what the board verifies."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pubmote.cli.config_check import ConfigError, check
from pubmote.core.tlscert import cert_der, fingerprint, load_cert, make_gateway_cert
from pubmote.gateway.config import load_config

PUBMOTE = str(Path(sys.executable).parent / "pubmote")


def _run(args: list[str], cwd: Path, home: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(home or cwd))
    return subprocess.run([PUBMOTE, *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, env=env)


def _one_line(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = p.stderr
    assert p.returncode == 2, (p.returncode, err, p.stdout)
    assert "Traceback" not in err + p.stdout and err.count("\n") == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_tls_init_then_show(tmp_path: Path) -> None:
    p = _run(["tls", "init", "--dir", "tls", "--name", "gw-1"], tmp_path)
    assert p.returncode == 0, p.stderr
    cert, key = tmp_path / "tls" / "gateway.crt", tmp_path / "tls" / "gateway.key"
    assert "--tcp-tls-cert" in p.stdout and "--gateway-cert" in p.stdout
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    _one_line(_run(["tls", "init", "--dir", "tls"], tmp_path), "--force")
    p = _run(["tls", "show", str(cert)], tmp_path)
    assert p.returncode == 0 and "gw-1" in p.stdout
    assert fingerprint(load_cert(cert)) in p.stdout
    _one_line(_run(["tls", "show", str(key)], tmp_path), "not a PEM or DER certificate")


@pytest.fixture()
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return make_gateway_cert(tmp_path / "tls")


def _check(**cfg: Any) -> None:
    check(load_config(None, cfg))


def test_config_tls_mistakes(pair: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = str(pair[0]), str(pair[1])
    tcp = ["127.0.0.1:6365"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tcp": tcp, "tcp_tls_cert": cert}, "go together"),
        ({"tcp": tcp, "tcp_tls_key": key}, "go together"),
        ({"tcp": tcp, "board_links_require_encryption": True}, "--tcp-tls-cert FILE"),
        ({"udp": ["127.0.0.1:6364"], "tcp": tcp, "tcp_tls_cert": cert, "tcp_tls_key": key},
         "--udp 127.0.0.1:6364"),
        ({"udp": ["127.0.0.1:6364"], "board_links_require_encryption": True}, "--udp"),
        ({"tcp": tcp, "tcp_tls_cert": cert, "tcp_tls_key": key,
          "board_links_require_encryption": "yes"}, "true or false"),
        ({"tcp": tcp, "tcp_tls_cert": 5, "tcp_tls_key": key}, "expected text"),
        ({"tcp": tcp, "tcp_tls_cert": key, "tcp_tls_key": key}, "not a PEM"),
        ({"tcp": tcp, "tcp_tls_cert": str(tmp_path / "nope.crt"), "tcp_tls_key": key},
         "no such file"),
    ]
    for cfg, needle in cases:
        with pytest.raises(ConfigError) as e:
            _check(**cfg)
        assert needle in str(e.value) and "\n" not in str(e.value), (cfg, str(e.value))
    # what works: TLS required (the default with a certificate), or UDP beside TLS when
    # encryption is explicitly not required
    _check(tcp=tcp, tcp_tls_cert=cert, tcp_tls_key=key)
    _check(tcp=tcp, udp=["127.0.0.1:6364"], tcp_tls_cert=cert, tcp_tls_key=key,
           board_links_require_encryption=False)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_bridge_refuses_a_tls_key_others_can_read(pair: tuple[Path, Path], tmp_path: Path,
                                                  mode: int) -> None:
    os.chmod(pair[1], mode)
    _one_line(_run(["bridge", "--no-view", "--sp-pub", "none", "--sp-sub", "none", "--tcp",
                    "127.0.0.1:1", "--tcp-tls-cert", str(pair[0]), "--tcp-tls-key",
                    str(pair[1])], tmp_path),
              str(pair[1]), "chmod 600 %s" % pair[1])


def test_bridge_refuses_udp_when_encryption_is_required(pair: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    _one_line(_run(["bridge", "--no-view", "--sp-pub", "none", "--sp-sub", "none", "--tcp",
                    "127.0.0.1:1", "--udp", "127.0.0.1:1", "--tcp-tls-cert", str(pair[0]),
                    "--tcp-tls-key", str(pair[1])], tmp_path),
              "--udp 127.0.0.1:1", "not encrypted", "--no-board-links-require-encryption")


def _deploy_args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"gateway_cert": None, "link": "tcp", **kw})


def test_deploy_gateway_cert_installs_what_the_board_verifies(
        pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pubmote.boards.profiles import board_config, check_config, load_profile
    from pubmote.cli.deploy import _gateway_cert

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    esp = load_profile("esp32")
    settings = _gateway_cert(_deploy_args(gateway_cert=str(pair[0])))
    cfg = board_config(esp, "esp1", "tcp", host="192.168.1.5", ssid="home", **settings)
    check_config(esp, cfg)
    assert cfg["tls"] == 1 and cfg["tls_name"] == "pubmote-gateway"
    assert bytes.fromhex(cfg["tls_ca"]) == cert_der(load_cert(pair[0]))
    # no --gateway-cert: the default certificate when `pubmote tls init` made one, else none
    assert _gateway_cert(_deploy_args()) == {}
    make_gateway_cert(tmp_path / "home" / ".config" / "pubmote" / "tls")
    assert _gateway_cert(_deploy_args())["tls"] == 1
    assert _gateway_cert(_deploy_args(gateway_cert="none")) == {}
    assert _gateway_cert(_deploy_args(link="uart")) == {}
    for link in ("udp", "uart", "stdio", None):
        with pytest.raises(ValueError, match="only --link tcp"):
            _gateway_cert(_deploy_args(link=link, gateway_cert=str(pair[0])))


def test_board_tls_config_mistakes(pair: tuple[Path, Path]) -> None:
    from pubmote.boards.profiles import board_config, check_config, load_profile

    unix = load_profile("unix")
    good = fingerprint(load_cert(pair[0]))
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("udp", {"tls": 1, "tls_fingerprint": good}, "only the tcp link"),
        ("tcp", {"tls": 1}, "one of the two"),
        ("tcp", {"tls": 1, "tls_fingerprint": good, "tls_ca": "3082"}, "one of the two"),
        ("tcp", {"tls": 1, "tls_fingerprint": good[:-2]}, "64 digits"),
        ("tcp", {"tls": 1, "tls_fingerprint": "zz" * 32}, "64 digits"),
        ("tcp", {"tls": 1, "tls_ca": "not hex"}, "DER"),
        ("tcp", {"tls_ca": "3082"}, "tls is off"),
    ]
    for link, extra, needle in bad:
        with pytest.raises(ValueError, match=needle):
            check_config(unix, board_config(unix, "b", link, host="127.0.0.1", **extra))
    check_config(unix, board_config(unix, "b", "tcp", host="127.0.0.1", tls=1,
                                    tls_fingerprint=good))


def test_deploy_gateway_cert_on_a_udp_board_is_one_line(pair: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    _one_line(_run(["deploy", "--board", "esp32", "--port", "/dev/ttyNOPE7", "--link", "udp",
                    "--gateway-cert", str(pair[0])], tmp_path), "only --link tcp")
