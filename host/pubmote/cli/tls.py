"""`pubmote tls ...`: the gateway's TLS certificate for WiFi board links: make one, show
what a board pins of it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg

DEFAULT_DIR = os.path.join("~", ".config", "pubmote", "tls")

_INIT_EPILOG = """\
examples:
  pubmote tls init                                 into %(dir)s
  pubmote tls init --dir /etc/pubmote/tls --host 192.168.1.5

then run the bridge with TLS on its --tcp face, and deploy WiFi boards that verify it:
  pubmote bridge --tcp 0.0.0.0:6365 --tcp-tls-cert DIR/gateway.crt --tcp-tls-key DIR/gateway.key
  pubmote deploy --board esp32 --port /dev/ttyUSB0 --link tcp --gateway-cert DIR/gateway.crt \\
      --set host=GATEWAY_IP --set ssid=NET --set password=PW

The certificate is self-signed (ECDSA P-256) and is its own CA: a board given it trusts
this gateway and no other. The key (mode 0600) never leaves the gateway. Making a new
pair means deploying the boards again (their pinned certificate changes).
""" % {"dir": DEFAULT_DIR}


def register(sub: Any) -> None:
    """Add `tls` and its subcommands to the `pubmote` parser."""
    t = sub.add_parser("tls", help="the gateway's TLS certificate for encrypted WiFi boards",
                       description="TLS on the bridge's --tcp board face: the gateway's "
                                   "certificate and key, and what boards pin of it.")
    tsub = t.add_subparsers(dest="tls_command", metavar="SUBCOMMAND", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    i = tsub.add_parser(
        "init", help="make a self-signed gateway certificate and key (mode 0600)",
        description="Write DIR/gateway.crt and DIR/gateway.key (both mode 0600, each "
                    "written under a temporary name and renamed into place).",
        epilog=_INIT_EPILOG, formatter_class=raw)
    i.add_argument("--dir", default=DEFAULT_DIR, type=arg(_tls_dir),
                   help="where to write them (default %s)" % DEFAULT_DIR)
    i.add_argument("--name", type=arg(kinds.dns_name),
                   help="the name boards check in the certificate (default pubmote-gateway; "
                        "boards connect by IP and check this name)")
    i.add_argument("--host", action="append", default=[], metavar="NAME_OR_IP",
                   type=arg(kinds.dns_name),
                   help="another DNS name or IP address the certificate is valid for "
                        "(repeatable; for other TLS clients: boards check --name)")
    i.add_argument("--days", type=arg(kinds.whole(1, 36500)), default=None,
                   help="validity in days (default 3650: boards have no trusted clock)")
    i.add_argument("--force", action="store_true",
                   help="replace an existing pair (boards deployed with it must be deployed "
                        "again)")
    i.set_defaults(run=_run_init)
    s = tsub.add_parser(
        "show", help="print a certificate's name and SHA-256 fingerprint",
        description="What a board checks of a gateway certificate: the name (tls_name) "
                    "and the SHA-256 fingerprint (tls_fingerprint, the alternative to "
                    "installing the certificate as tls_ca).")
    s.add_argument("cert", metavar="CERT", type=arg(file_kinds.cert_in),
                   help="the certificate (PEM or DER)")
    s.set_defaults(run=_run_show)


def _tls_dir(value: str) -> str:
    """The folder `tls init` writes to, ~ expanded (its default is under ~)."""
    return file_kinds.folder_out(os.path.expanduser(value))


def _run_init(args: argparse.Namespace) -> int:
    from pubmote.core.tlscert import DEFAULT_DAYS, DEFAULT_SERVER_NAME, make_gateway_cert

    try:
        cert, key = make_gateway_cert(os.path.expanduser(args.dir),
                                      name=args.name or DEFAULT_SERVER_NAME,
                                      hosts=tuple(args.host),
                                      days=args.days if args.days is not None else DEFAULT_DAYS,
                                      force=args.force)
    except OSError as e:
        print("pubmote tls init: %s: %s" % (getattr(e, "filename", None) or args.dir,
                                            e.strerror or e), file=sys.stderr)
        return 1
    except ValueError as e:
        print("pubmote tls init: %s" % e, file=sys.stderr)
        return 2
    print("certificate %s\nkey         %s (mode 0600)" % (cert, key))
    print("bridge:  --tcp-tls-cert %s --tcp-tls-key %s" % (cert, key))
    print("boards:  pubmote deploy ... --link tcp --gateway-cert %s" % cert)
    return 0


def _run_show(args: argparse.Namespace) -> int:
    from pubmote.core.tlscert import fingerprint, load_cert, server_name

    try:
        cert = load_cert(args.cert)
        print("name        %s\nsha256      %s" % (server_name(cert), fingerprint(cert)))
    except ValueError as e:
        print("pubmote tls show: %s" % e, file=sys.stderr)
        return 2
    return 0
