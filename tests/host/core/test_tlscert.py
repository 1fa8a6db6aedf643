"""The gateway's TLS certificate (pubmote.core.tlscert): made 0600 and atomically, never
overwritten by accident, read back for boards; key files others can read are refused."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509

from pubmote.core.tlscert import (
    CertError,
    board_settings,
    check_key_file,
    fingerprint,
    load_cert,
    make_gateway_cert,
    server_name,
)


def test_made_private_self_signed_and_read_back(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a umask that would leave new files readable by all
    try:
        cert_path, key_path = make_gateway_cert(tmp_path / "tls", name="gw-east",
                                                hosts=("192.168.1.5", "gw.local"))
    finally:
        os.umask(old)
    for p in (cert_path, key_path):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tls").stat().st_mode) == 0o700
    assert sorted(os.listdir(tmp_path / "tls")) == ["gateway.crt", "gateway.key"]  # no temp
    check_key_file(key_path)
    cert = load_cert(cert_path)
    assert cert.issuer == cert.subject  # self-signed: its own CA
    assert server_name(cert) == "gw-east"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["192.168.1.5"]
    assert "gw.local" in san.get_values_for_type(x509.DNSName)
    settings = board_settings(cert_path)
    der = bytes.fromhex(str(settings["tls_ca"]))
    assert settings["tls"] == 1 and settings["tls_name"] == "gw-east"
    assert hashlib.sha256(der).hexdigest() == fingerprint(cert)
    assert load_cert(_write(tmp_path / "c.der", der)) == cert  # DER reads too


def test_an_existing_pair_is_kept_unless_forced(tmp_path: Path) -> None:
    cert_path, _ = make_gateway_cert(tmp_path)
    before = cert_path.read_bytes()
    with pytest.raises(CertError, match="--force"):
        make_gateway_cert(tmp_path)
    assert cert_path.read_bytes() == before
    make_gateway_cert(tmp_path, force=True)
    assert cert_path.read_bytes() != before


@pytest.mark.parametrize("bits", [0o040, 0o020, 0o010, 0o004, 0o002, 0o001, 0o044, 0o077])
def test_key_file_open_to_others_is_refused(tmp_path: Path, bits: int) -> None:
    _, key = make_gateway_cert(tmp_path)
    os.chmod(key, 0o600 | bits)
    with pytest.raises(CertError) as e:
        check_key_file(key)
    msg = str(e.value)
    assert str(key) in msg and "chmod 600 %s" % key in msg and "\n" not in msg


def test_key_file_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="No such file"):
        check_key_file(tmp_path / "missing.key")
    with pytest.raises(CertError, match="not a regular file"):
        check_key_file(tmp_path)


@pytest.mark.parametrize("content", [b"", b"not a cert", b"-----BEGIN CERTIFICATE-----\nAAAA\n",
                                     os.urandom(300), b"x" * (70 * 1024)])
def test_bad_certificate_files(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(CertError):
        load_cert(_write(tmp_path / "bad.crt", content))


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p
