"""`pubmote mesh ...`: the gateway's libp2p identity, a ping to any libp2p peer, and a
node that answers identify and ping (for trying interop by hand)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.common import EXIT_SIGINT, run_async
from pubmote.cli.kinds import arg
from pubmote.gateway.mesh.keyfile import default_key_file

DEFAULT_LISTEN = "/ip4/127.0.0.1/tcp/4001"  # loopback unless told otherwise


def register(sub: Any) -> None:
    """Add `mesh` and its subcommands to the `pubmote` parser."""
    m = sub.add_parser("mesh", help="the gateway mesh's libp2p node: identity, ping, serve",
                       description="The gateway mesh speaks libp2p (TCP, Noise, Yamux, "
                                   "identify, ping, GossipSub), tested against js-libp2p "
                                   "and py-libp2p.")
    msub = m.add_subparsers(dest="mesh_command", metavar="SUBCOMMAND", required=True)

    def key_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--key-file", metavar="FILE", type=arg(file_kinds.mesh_key),
                       help="Ed25519 identity key (created with mode 0600 when missing; "
                            "default %s)" % default_key_file())

    raw = argparse.RawDescriptionHelpFormatter
    i = msub.add_parser(
        "id", help="print this gateway's PeerId and listen addresses",
        description="Print this gateway's libp2p PeerId (from its key file, made when "
                    "missing) and the multiaddrs other gateways give to --mesh-peer.",
        epilog="examples:\n"
               "  pubmote mesh id\n"
               "  pubmote mesh id --key-file gw2.key --listen /ip4/192.168.1.5/tcp/4002\n\n"
               "Use the same --key-file as `pubmote bridge --mesh-key-file`.",
        formatter_class=raw)
    key_arg(i)
    i.add_argument("--listen", action="append", default=[], metavar="MULTIADDR",
                   type=arg(kinds.multiaddr),
                   help="listen address to print (default %s)" % DEFAULT_LISTEN)
    i.set_defaults(run=_run_id)

    p = msub.add_parser(
        "ping", help="ping a libp2p peer: /ip4/H/tcp/P/p2p/PEERID",
        description="Dial a libp2p peer (a gateway, js-libp2p, py-libp2p, kubo) over TCP + "
                    "Noise + Yamux and time /ipfs/ping/1.0.0 round trips; exit 1 when it "
                    "cannot be reached.",
        epilog="examples:\n"
               "  pubmote mesh ping /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW...\n"
               "  pubmote mesh ping --count 10 --timeout 3 /ip4/10.0.0.2/tcp/4001/p2p/12D3KooW...",
        formatter_class=raw)
    p.add_argument("addr", metavar="MULTIADDR", type=arg(kinds.peer_multiaddr))
    p.add_argument("--count", type=arg(kinds.whole(1)), default=3, metavar="N",
                   help="round trips (default 3)")
    p.add_argument("--timeout", type=arg(kinds.seconds()), default=10.0, metavar="S",
                   help="dial timeout in seconds (default 10)")
    p.add_argument("--key-file", metavar="FILE", type=arg(file_kinds.mesh_key_in),
                   help="identity key to use (default: a throw-away key)")
    p.set_defaults(run=_run_ping)

    s = msub.add_parser(
        "serve", help="run a node that answers identify and ping",
        description="Run a libp2p node that answers identify and ping until Ctrl-C: for "
                    "trying another libp2p implementation against pubmote by hand. It "
                    "prints its full multiaddrs.",
        epilog="examples:\n"
               "  pubmote mesh serve --listen /ip4/127.0.0.1/tcp/4001\n"
               "  pubmote mesh serve --key-file gw.key --listen /ip4/0.0.0.0/tcp/4001",
        formatter_class=raw)
    key_arg(s)
    s.add_argument("--listen", action="append", default=[], metavar="MULTIADDR",
                   type=arg(kinds.multiaddr),
                   help="listen address (repeatable; default %s)" % DEFAULT_LISTEN)
    s.set_defaults(run=_run_serve)


def _load_key(path: str | None) -> Any:
    from pubmote.p2p.identity import load_or_create_key

    return load_or_create_key(path or default_key_file(), make_dirs=not path)


def _run_id(args: argparse.Namespace) -> int:
    from pubmote.p2p.multiaddr import Multiaddr

    try:
        key = _load_key(args.key_file)
        listen = [Multiaddr(a) for a in (args.listen or [DEFAULT_LISTEN])]
    except (ValueError, OSError) as e:
        print("pubmote mesh id: %s" % e, file=sys.stderr)
        return 1
    print("PeerId: %s" % key.peer_id)
    for a in listen:
        print("listen: %s" % a.with_p2p(str(key.peer_id)))
    return 0


def _run_ping(args: argparse.Namespace) -> int:
    from pubmote.p2p import Host, KeyPair, MeshError, Multiaddr, PeerId

    async def go() -> int:
        key = _load_key(args.key_file) if args.key_file else KeyPair.generate()
        addr = Multiaddr(args.addr)
        if addr.peer_id_text() is None:
            print("pubmote mesh ping: the address needs a /p2p/PEERID part", file=sys.stderr)
            return 2
        peer = PeerId.from_base58(addr.peer_id_text() or "")
        async with Host(key) as host:
            try:
                await host.connect(addr, timeout_s=args.timeout)
                rtts = await host.ping(peer, args.count)
            except (TimeoutError, MeshError, OSError) as e:
                print("pubmote mesh ping: %s" % e, file=sys.stderr)
                return 1
            for n, rtt in enumerate(rtts, 1):
                print("ping %d: %.3f ms" % (n, rtt * 1000))
            with contextlib.suppress(MeshError, asyncio.TimeoutError):
                info = await asyncio.wait_for(host.identify(peer), 5.0)
                print("agent: %s" % info.agent_version)
                print("protocols: %s" % " ".join(info.protocols))
        return 0

    try:
        return run_async(go)
    except ValueError as e:
        print("pubmote mesh ping: %s" % e, file=sys.stderr)
        return 2


def _run_serve(args: argparse.Namespace) -> int:
    from pubmote.p2p import Host, PeerEvent

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    async def go() -> int:
        key = _load_key(args.key_file)
        host = Host(key, listen_addrs=args.listen or [DEFAULT_LISTEN])

        def on_event(ev: PeerEvent) -> None:
            print("%s %s" % (ev.kind, ev.peer_id), flush=True)

        host.add_event_handler(on_event)
        stop = asyncio.Event()
        got: list[int] = []

        def on_signal(sig: int) -> None:
            got.append(sig)
            stop.set()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, on_signal, sig)
        async with host:
            print("PeerId: %s" % host.peer_id)
            for a in host.listen_addrs:
                print("listen: %s" % a.with_p2p(str(host.peer_id)), flush=True)
            await stop.wait()
        # as a shell reports it: 130 after Ctrl-C, 0 after a SIGTERM (a service stopped)
        return EXIT_SIGINT if got[:1] == [signal.SIGINT] else 0

    try:
        return run_async(go)
    except (ValueError, OSError) as e:
        print("pubmote mesh serve: %s" % e, file=sys.stderr)
        return 1
