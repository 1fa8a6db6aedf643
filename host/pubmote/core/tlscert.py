"""The gateway's TLS certificate for WiFi board links: make a self-signed one (`pubmote tls
init`), read what a board needs to verify it (the certificate in DER, its name, its
SHA-256 fingerprint), and refuse a private key file that others can read."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERT_NAME = "gateway.crt"
KEY_NAME = "gateway.key"
DEFAULT_SERVER_NAME = "pubmote-gateway"
DEFAULT_DAYS = 3650  # a board has no clock worth trusting: expiry is not what protects it
MAX_PEM_BYTES = 64 * 1024  # a certificate chain or key larger than this is not one


class CertError(ValueError):
    """A certificate or key file that cannot be used; str() is one line naming the file."""


def check_key_file(path: str | os.PathLike[str]) -> None:
    """CertError unless `path` is a regular file that only its owner can read or write."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise CertError("TLS key %s: %s" % (p, e.strerror or e)) from None
    if not stat.S_ISREG(st.st_mode):
        raise CertError("TLS key %s: not a regular file" % p)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CertError("TLS key %s is readable by others (mode %o): run `chmod 600 %s`"
                        % (p, stat.S_IMODE(st.st_mode), p))


def load_cert(path: str | os.PathLike[str]) -> x509.Certificate:
    """The first certificate in a PEM (or DER) file; CertError when there is none."""
    p = Path(path)
    try:
        data = p.read_bytes()[:MAX_PEM_BYTES + 1]
    except OSError as e:
        raise CertError("TLS certificate %s: %s" % (p, e.strerror or e)) from None
    if len(data) > MAX_PEM_BYTES:
        raise CertError("TLS certificate %s: larger than %d bytes, not a certificate"
                        % (p, MAX_PEM_BYTES))
    try:
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificates(data)[0]
        return x509.load_der_x509_certificate(data)
    except ValueError as e:
        raise CertError("TLS certificate %s: not a PEM or DER certificate (%s)" % (p, e)) \
            from None


def cert_der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate's DER, in hex: what a board pins with tls_fingerprint."""
    return hashlib.sha256(cert_der(cert)).hexdigest()


def server_name(cert: x509.Certificate) -> str:
    """The name a board checks the certificate against: its first DNS name, else its CN."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.DNSName)
        if names:
            return str(names[0])
    except x509.ExtensionNotFound:
        pass
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not cns:
        raise CertError("the certificate has neither a DNS name nor a common name for a "
                        "board to check")
    return str(cns[0].value)


def board_settings(cert_path: str | os.PathLike[str]) -> dict[str, object]:
    """The board config entries that make a board's tcp link verify this gateway: TLS on,
    the certificate as the board's one trusted CA, and the name it must carry."""
    cert = load_cert(cert_path)
    return {"tls": 1, "tls_ca": cert_der(cert).hex(), "tls_name": server_name(cert)}


def _write_private(path: Path, data: bytes) -> None:
    # 0600 from the first byte, under a temporary name, then renamed into place: no
    # moment in which the file is readable by others or half written
    tmp = path.with_name(".%s.tmp%d" % (path.name, os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def make_gateway_cert(directory: str | os.PathLike[str], *, name: str = DEFAULT_SERVER_NAME,
                      hosts: tuple[str, ...] = (), days: int = DEFAULT_DAYS,
                      force: bool = False) -> tuple[Path, Path]:
    """Write a self-signed ECDSA P-256 certificate and its key (gateway.crt, gateway.key,
    both mode 0600) into `directory`; return their paths. The certificate is its own CA:
    a board given it (`pubmote deploy --gateway-cert`) trusts this gateway and no other.
    `hosts` are extra DNS names or IP addresses it is valid for. Refuses to overwrite an
    existing pair unless `force` (boards deployed with the old one would stop connecting)."""
    d = Path(directory)
    cert_path, key_path = d / CERT_NAME, d / KEY_NAME
    if not force and (cert_path.exists() or key_path.exists()):
        raise CertError("%s already holds a gateway certificate or key (boards deployed "
                        "with it trust only it); give --force to replace both" % d)
    if not 1 <= days <= 36500:
        raise CertError("--days %d: 1 to 36500" % days)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    alt: list[x509.GeneralName] = [x509.DNSName(name)]
    for h in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            alt.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    _write_private(key_path, key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
