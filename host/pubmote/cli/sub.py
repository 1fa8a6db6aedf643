"""`pubmote sub URL [PREFIX ...]`: an SP SUB client that prints what the bridge relays,
CBOR payloads decoded: the quickest way to read a board's readings."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from typing import Any

from pubmote.cli import kinds
from pubmote.cli.common import run_async
from pubmote.cli.kinds import arg

EPILOG = """\
examples:
  pubmote sub tcp://127.0.0.1:5560                          every message
  pubmote sub tcp://127.0.0.1:5560 /pubmote/demo/sim1/      one board's topics
  pubmote sub tcp://127.0.0.1:5560 /pubmote/ --json --count 10

Each line is `<topic> <payload>`: CBOR decoded (a board's readings), else UTF-8 text,
else hex. Prefixes are nanomsg's byte prefixes of `<topic URI>|<payload>` (none: all).
A CBOR map with `taken_ms` (ms since 1970 when the board took the reading, by its clock:
the demo's readings) older than --late-ms when it arrives is marked `(late: taken N s
before)`; --json adds its `age_ms` and `late` (docs/protocols/event-time.md).
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sub", help="print the messages of a bridge's SP PUB endpoint, CBOR decoded",
        description="Connect an SP SUB socket (as nanocat --sub does) to a bridge's --sp-pub "
                    "endpoint and print every message whose `<topic URI>|<payload>` starts "
                    "with one of the PREFIXes, payloads decoded from CBOR.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", metavar="URL", type=arg(kinds.client_url),
                   help="the bridge's --sp-pub endpoint: tcp://HOST:PORT or ipc:///PATH")
    p.add_argument("prefix", metavar="PREFIX", nargs="*",
                   help="byte prefixes to receive (default: everything)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line: topic, payload (decoded), hex")
    p.add_argument("--count", type=arg(kinds.whole(1)), metavar="N",
                   help="exit after N messages")
    p.add_argument("--late-ms", type=arg(kinds.whole(0)), metavar="MS", default=LATE_MS,
                   help="mark a reading whose taken_ms is more than MS before its arrival "
                        "as late (default %d)" % LATE_MS)
    p.set_defaults(run=run)


def decode_payload(payload: bytes) -> Any:
    """CBOR if the whole payload is one CBOR item of the subset (cbor.loads is bounded and
    raises only CborError, whatever a publisher sent), else text, else hex."""
    from pubmote.core import cbor

    try:
        return cbor.loads(payload)
    except cbor.CborError:
        pass
    try:
        return payload.decode()
    except UnicodeDecodeError:
        return payload.hex()


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(_jsonable(k)): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


LATE_MS = 2000


def age_ms(value: Any, now_ms: float) -> float | None:
    """How long before now_ms a payload's reading was taken: its `taken_ms` (a CBOR map's
    int), else None."""
    if not isinstance(value, dict):
        return None
    taken = value.get("taken_ms")
    if type(taken) is not int:
        return None
    return now_ms - taken


def format_line(body: bytes, as_json: bool, now_ms: float | None = None,
                late_ms: int = LATE_MS) -> str:
    """One output line for one message, received at now_ms (ms since 1970; default now);
    never raises, never more than one line (text is shown with control characters
    escaped)."""
    from pubmote.core.display import printable

    topic, _, payload = body.partition(b"|")
    shown = printable(topic.decode(errors="replace"))
    try:
        value = decode_payload(payload)
        age = age_ms(value, time.time() * 1000 if now_ms is None else now_ms)
        if as_json:
            rec = {"topic": shown, "payload": _jsonable(value), "hex": payload.hex()}
            if age is not None:
                rec["age_ms"] = round(age, 1)
                rec["late"] = age > late_ms
            return json.dumps(rec, sort_keys=True)
        line = "%s %s" % (shown, printable(value) if isinstance(value, str)
                          else json.dumps(_jsonable(value)))
        if age is not None and age > late_ms:
            line += " (late: taken %.1f s before)" % (age / 1000)
        return line
    except Exception as e:  # noqa: BLE001 - one odd payload must not end the subscriber
        if as_json:
            return json.dumps({"topic": shown, "payload": None, "hex": payload.hex(),
                               "error": str(e)}, sort_keys=True)
        return "%s %s" % (shown, payload.hex())


async def _sub(args: argparse.Namespace) -> int:
    from pubmote.faces.sp import parse_url
    from pubmote_wire import sp
    from pubmote_wire.subfilter import SubFilter

    kind, where = parse_url(args.url)
    if kind == "ipc":
        reader, writer = await asyncio.open_unix_connection(where)
    else:
        reader, writer = await asyncio.open_connection(*where)
    writer.write(sp.header(sp.SUB))
    filt = SubFilter()
    for p in args.prefix or [""]:
        filt.subscribe(p.encode())
    seen = 0
    try:
        # the bridge's header first: it says whether this is the endpoint that publishes
        peer = await reader.readexactly(sp.HEADER_SIZE)
        proto = sp.check_header(peer)
        if proto != sp.PUB:
            raise EndpointError(
                "%s is %s, not a bridge's SP PUB endpoint: subscribe to its --sp-pub "
                "endpoint (default tcp://127.0.0.1:5560)" % (args.url, "the bridge's SP SUB "
                                                             "endpoint (where `pubmote pub` "
                                                             "publishes)" if proto == sp.SUB
                                                             else "an SP socket of protocol "
                                                             "%d" % proto))
        dec = sp.MsgDecoder()
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                print("pubmote sub: %s closed the connection" % args.url, file=sys.stderr)
                return 1
            for m in dec.feed(chunk):
                body = bytes(m)
                if not filt.matches(body):
                    continue
                print(format_line(body, args.json, late_ms=args.late_ms), flush=True)
                seen += 1
                if args.count is not None and seen >= args.count:
                    return 0
    except asyncio.IncompleteReadError:
        print("pubmote sub: %s closed the connection" % args.url, file=sys.stderr)
        return 1
    except asyncio.CancelledError:  # Ctrl-C: what was received
        print("pubmote sub: %d message%s" % (seen, "" if seen == 1 else "s"), file=sys.stderr,
              flush=True)
        raise
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


class EndpointError(Exception):
    """The URL answers, but not as a bridge's SP PUB endpoint; the message says what to do."""


def run(args: argparse.Namespace) -> int:
    from pubmote_wire.errors import DecodeError

    try:
        return run_async(lambda: _sub(args))
    except ValueError as e:  # the URL
        print("pubmote sub: %s: %s" % (args.url, e), file=sys.stderr)
        return 2
    except DecodeError as e:
        print("pubmote sub: %s is not an SP PUB endpoint (%s)" % (args.url, e), file=sys.stderr)
        return 1
    except EndpointError as e:
        print("pubmote sub: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("pubmote sub: cannot connect to %s: %s (is `pubmote bridge` running with "
              "--sp-pub %s?)" % (args.url, e.strerror or e, args.url), file=sys.stderr)
        return 1
