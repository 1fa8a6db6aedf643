"""`pubmote dissect`: an NDN packet or LpPacket as a JSON tree."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.kinds import arg


def register(sub: Any) -> None:
    """Add `dissect` to the `pubmote` parser."""
    d = sub.add_parser(
        "dissect", help="decode an NDN packet or LpPacket as a JSON tree",
        description="Print the canonical JSON tree of one NDN packet or NDNLPv2 LpPacket: "
                    "element names, Names as URIs, binary values as hex, notify parameters "
                    "and signature validity. Same output as `micropython -m "
                    "pubmote_wire.dissect HEX` on a board.")
    d.add_argument("hex", metavar="HEX", nargs="?", type=arg(kinds.packet_hex),
                   help="the packet as hex, or - to read hex from stdin")
    d.add_argument("--trace", metavar="FILE", type=arg(file_kinds.file_in),
                   help="dissect every packet of a `pubmote bridge --trace` file instead")
    d.set_defaults(run=_dissect)


def _dissect(args: argparse.Namespace) -> int:
    from pubmote_wire import dissect

    if args.trace:
        from pubmote.core.trace import TraceError, format_trace

        try:
            for block in format_trace(args.trace):
                print(block, flush=True)
        except OSError as e:
            print("pubmote dissect: --trace %s: %s" % (args.trace, e.strerror or e),
                  file=sys.stderr)
            return 2
        except TraceError as e:
            print("pubmote dissect: --trace %s: %s" % (args.trace, e), file=sys.stderr)
            return 2
        return 0
    if args.hex is None:
        print("pubmote dissect: give HEX, - (stdin) or --trace FILE", file=sys.stderr)
        return 2
    text = sys.stdin.read() if args.hex == "-" else args.hex
    out, ok = dissect.dissect_hex(text)
    print(out)
    return 0 if ok else 1
