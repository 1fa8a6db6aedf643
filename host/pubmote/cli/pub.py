"""`pubmote pub URL TOPIC PAYLOAD`: an SP PUB client that publishes into a bridge's SUB
endpoint, the mirror of `pubmote sub`: the quickest way to send a board a command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from pubmote.cli import kinds
from pubmote.cli.common import run_async
from pubmote.cli.kinds import arg

DEFAULT_URL = "tcp://127.0.0.1:5561"
HANDSHAKE_S = 5.0  # how long the bridge may take to answer the SP header

EPILOG = """\
examples:
  pubmote pub tcp://127.0.0.1:5561 /pubmote/demo/sim1/command hello
  pubmote pub tcp://127.0.0.1:5561 /pubmote/demo/sim1/command --json '{"period_ms": 200}'
  pubmote pub tcp://127.0.0.1:5561 /pubmote/to/gw/sim1 --hex 0a0b --count 5 --interval 1

The message is `<TOPIC>|<PAYLOAD>`, as nanocat --pub would send it; boards whose filters
match receive it, SP subscribers see it on the bridge's PUB endpoint. SP has no
acknowledgement: "sent" means handed to the bridge's connection.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "pub", help="publish a message into a bridge's SP SUB endpoint (--json: CBOR)",
        description="Connect an SP PUB socket (as nanocat --pub does) to a bridge's --sp-sub "
                    "endpoint and publish PAYLOAD on TOPIC.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", metavar="URL", type=arg(kinds.client_url),
                   help="the bridge's --sp-sub endpoint: tcp://HOST:PORT or ipc:///PATH "
                        "(a bridge binds %s by default)" % DEFAULT_URL)
    p.add_argument("topic", metavar="TOPIC", type=arg(kinds.ndn_name),
                   help="an NDN name URI, e.g. /pubmote/demo/sim1/cmd")
    p.add_argument("payload", metavar="PAYLOAD", help="the payload: UTF-8 text by default")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true",
                      help="PAYLOAD is JSON, sent as CBOR (what the demo's readings are)")
    form.add_argument("--hex", action="store_true", help="PAYLOAD is hex bytes")
    p.add_argument("--count", type=arg(kinds.whole(1)), default=1, metavar="N",
                   help="publish N times (default 1)")
    p.add_argument("--interval", type=arg(kinds.seconds(zero_ok=True)), default=1.0,
                   metavar="S",
                   help="seconds between messages with --count (default 1)")
    p.set_defaults(run=run)


class UsageError(ValueError):
    """An argument that cannot be published; the message names it."""


class EndpointError(Exception):
    """The URL answers, but not as a bridge's SP SUB endpoint; the message says what to do."""


def message(topic: str, payload: str, as_json: bool, as_hex: bool) -> bytes:
    """The SP message body `<topic URI>|<payload bytes>` for the arguments."""
    from pubmote.core import cbor
    from pubmote_wire import name as ndn_name
    from pubmote_wire.errors import DecodeError

    try:
        if not topic.startswith("/"):
            raise DecodeError("it does not start with /")
        uri = ndn_name.to_uri(ndn_name.from_uri(topic))
    except (DecodeError, ValueError) as e:
        raise UsageError("TOPIC %r: not an NDN name URI (%s); e.g. /pubmote/demo/sim1/command"
                         % (topic, e)) from None
    if as_json:
        try:
            body = cbor.dumps(json.loads(payload))
        except json.JSONDecodeError as e:
            raise UsageError("PAYLOAD %r: not JSON (%s); e.g. '{\"on\": true}'"
                             % (payload, e.msg)) from None
    elif as_hex:
        try:
            body = bytes.fromhex(payload)
        except ValueError:
            raise UsageError("PAYLOAD %r: not hex bytes; e.g. 0a0b0c" % payload) from None
    else:
        body = payload.encode()
    return uri.encode() + b"|" + body


async def _pub(args: argparse.Namespace, body: bytes) -> int:
    from pubmote.faces.sp import parse_url
    from pubmote_wire import sp

    kind, where = parse_url(args.url)
    if kind == "ipc":
        reader, writer = await asyncio.open_unix_connection(where)
    else:
        reader, writer = await asyncio.open_connection(*where)
    try:
        writer.write(sp.header(sp.PUB))
        # the bridge's header first: it says whether this is the endpoint that takes
        # publishes (a SUB socket), before anything is sent into the void
        try:
            peer = await asyncio.wait_for(reader.readexactly(sp.HEADER_SIZE), HANDSHAKE_S)
        except asyncio.IncompleteReadError:
            raise EndpointError("%s closed the connection during the SP handshake"
                                  % args.url) from None
        except TimeoutError:
            raise EndpointError("%s did not answer the SP handshake within %g s"
                                  % (args.url, HANDSHAKE_S)) from None
        proto = sp.check_header(peer)
        if proto != sp.SUB:
            raise EndpointError(
                "%s is %s, not a bridge's SP SUB endpoint: publish into its --sp-sub "
                "endpoint (default %s)" % (args.url, "the bridge's SP PUB endpoint (where "
                                           "`pubmote sub` reads)" if proto == sp.PUB else
                                           "an SP socket of protocol %d" % proto, DEFAULT_URL))
        frame = sp.encode_msg(body)
        sent = 0
        try:
            for i in range(args.count):
                if i:
                    await asyncio.sleep(args.interval)
                writer.write(frame)
                await writer.drain()
                sent += 1
        except asyncio.CancelledError:  # Ctrl-C: what went out
            print("sent %d of %d messages to %s" % (sent, args.count, args.url),
                  file=sys.stderr, flush=True)
            raise
        print("sent %d message%s to %s" % (args.count, "" if args.count == 1 else "s",
                                             args.url), file=sys.stderr)
        return 0
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def run(args: argparse.Namespace) -> int:
    from pubmote_wire.errors import DecodeError

    if args.count < 1:
        print("pubmote pub: --count %d: give 1 or more" % args.count, file=sys.stderr)
        return 2
    if not args.interval >= 0:
        print("pubmote pub: --interval %g: give 0 or more seconds" % args.interval,
              file=sys.stderr)
        return 2
    try:
        body = message(args.topic, args.payload, args.json, args.hex)
    except UsageError as e:
        print("pubmote pub: %s" % e, file=sys.stderr)
        return 2
    try:
        return run_async(lambda: _pub(args, body))
    except ValueError as e:  # the URL (DecodeError, a ValueError, is caught below first)
        if isinstance(e, DecodeError):
            print("pubmote pub: %s is not an SP endpoint (%s)" % (args.url, e), file=sys.stderr)
            return 1
        print("pubmote pub: URL %s: %s" % (args.url, e), file=sys.stderr)
        return 2
    except EndpointError as e:
        print("pubmote pub: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("pubmote pub: cannot connect to %s: %s (is `pubmote bridge` running with "
              "--sp-sub %s?)" % (args.url, e.strerror or e, args.url), file=sys.stderr)
        return 1
