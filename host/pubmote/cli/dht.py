"""`pubmote dht`: BEP 44 mutable items and BEP 50 topics on the BitTorrent DHT from the
command line (keygen, put, get, subscribe, node)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

from pubmote.cli import file_kinds, kinds
from pubmote.cli.common import run_async
from pubmote.cli.kinds import arg
from pubmote.core.addresses import parse_hostport

DHT_EPILOG = """\
examples:
  pubmote dht keygen --key-file gw.key
  pubmote dht put --key-file gw.key --salt /site/temp "21.5 C"
  pubmote dht get --pubkey 77ff8490...e548 --salt /site/temp
  pubmote dht subscribe --pubkey 77ff8490...e548 --salt /site/temp
  pubmote dht node --port 6881                      a DHT node others bootstrap from
  pubmote dht put --key-file gw.key --salt t --bootstrap 127.0.0.1:6881 hello

Items are BEP 44 mutable items: the target is SHA-1(public key + salt), the value is
signed with the key, and every put carries a higher sequence number (put finds the
current one first). subscribe joins the topic's BEP 50 overlay and prints each newer
value as it is pushed. Without --bootstrap the public routers are used:
router.bittorrent.com, dht.transmissionbt.com and router.utorrent.com (port 6881).
A key file holds the ed25519 secret as hex: a 32-byte seed or libtorrent's 64-byte
expanded key.
"""

PUBLIC_ROUTERS = ("router.bittorrent.com:6881", "dht.transmissionbt.com:6881",
                  "router.utorrent.com:6881")


def register(sub: Any) -> None:
    """Add the `dht` command group to the top-level subparsers."""
    d = sub.add_parser(
        "dht", help="BEP 44 items and BEP 50 topics on the BitTorrent DHT",
        description="Put and get signed mutable items (BEP 44) on the BitTorrent DHT, "
                    "subscribe to a topic's overlay (BEP 50), or run a DHT node.",
        epilog=DHT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    d.set_defaults(run=_no_action(d))
    acts = d.add_subparsers(dest="dht_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap", action="append", default=[], metavar="HOST:PORT",
                       type=arg(kinds.hostport),
                       help="a DHT node to join through (repeatable; default: the public "
                            "BitTorrent routers)")
        p.add_argument("--port", type=arg(kinds.port), default=0, metavar="PORT",
                       help="UDP port of our DHT node (default: any free port)")
        p.add_argument("--bind", default="127.0.0.1", metavar="HOST", type=arg(kinds.host),
                       help="address our DHT node binds (default 127.0.0.1: this host only; "
                            "0.0.0.0 to reach the internet's DHT)")
        p.add_argument("--timeout", type=arg(kinds.seconds()), default=2.0, metavar="S",
                       help="per-query timeout in seconds (default 2)")

    k = acts.add_parser("keygen", help="create an ed25519 key file",
                        description="Write a fresh ed25519 seed (hex, mode 0600) to FILE and "
                                    "print its public key.",
                        epilog="example:\n  pubmote dht keygen --key-file gw.key    prints the "
                               "public key that get/subscribe take as --pubkey",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("--key-file", required=True, metavar="FILE", type=arg(file_kinds.dht_key))
    k.set_defaults(run=_keygen)

    p = acts.add_parser("put", help="sign and store a mutable item",
                        description="Sign VALUE with the key and store it on the nodes "
                                    "nearest its target, with the next sequence number.",
                        epilog=DHT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("value", metavar="VALUE", help="the value (UTF-8 text, or hex with --hex)")
    p.add_argument("--key-file", required=True, metavar="FILE",
                   type=arg(file_kinds.dht_key_in), help="the ed25519 secret (hex); see keygen")
    p.add_argument("--salt", default="", metavar="S", type=arg(kinds.salt),
                   help="the item's salt (<= 64 bytes)")
    p.add_argument("--seq", type=arg(kinds.whole(0)), metavar="N",
                   help="sequence number (default: one more than the DHT's current)")
    p.add_argument("--hex", action="store_true", help="VALUE is hex")
    common(p)
    p.set_defaults(run=_put)

    raw = argparse.RawDescriptionHelpFormatter
    g = acts.add_parser("get", help="look up a mutable item",
                        description="Find the newest BEP 44 item for (public key, salt) on "
                                    "the DHT and print its sequence number and value; exit "
                                    "1 when no node holds it.",
                        epilog="examples:\n"
                               "  pubmote dht get --pubkey 77ff8490...e548 --salt /site/temp\n"
                               "  pubmote dht get --pubkey 77ff...e548 --salt t "
                               "--bootstrap 127.0.0.1:6881\n\n"
                               "The public key is what `pubmote dht keygen` printed for the "
                               "publisher's key file.", formatter_class=raw)
    g.add_argument("--pubkey", required=True, metavar="HEX", type=arg(kinds.pubkey),
                   help="the 32-byte public key")
    g.add_argument("--salt", default="", metavar="S", type=arg(kinds.salt))
    common(g)
    g.set_defaults(run=_get)

    s = acts.add_parser("subscribe", help="follow a topic through its BEP 50 overlay",
                        description="Join the BEP 50 overlay of the topic (public key, salt), "
                                    "print its current value, then every newer value as "
                                    "publishers put it; Ctrl-C (or --count) ends it.",
                        epilog="examples:\n"
                               "  pubmote dht subscribe --pubkey 77ff8490...e548 --salt "
                               "/site/temp\n"
                               "  pubmote dht subscribe --pubkey 77ff...e548 --salt t --count 1 "
                               "--bootstrap 127.0.0.1:6881\n\n"
                               "Publish into it with `pubmote dht put --key-file KEY --salt "
                               "SALT VALUE`.", formatter_class=raw)
    s.add_argument("--pubkey", required=True, metavar="HEX", type=arg(kinds.pubkey))
    s.add_argument("--salt", default="", metavar="S", type=arg(kinds.salt))
    s.add_argument("--count", type=arg(kinds.whole(1)), metavar="N",
                   help="exit after N values")
    common(s)
    s.set_defaults(run=_subscribe)

    n = acts.add_parser("node", help="run a DHT node until interrupted",
                        description="Run a DHT node (BEP 5 + BEP 44) that others can "
                                    "bootstrap from; prints its address.",
                        epilog="examples:\n"
                               "  pubmote dht node --port 6881                  others use "
                               "--bootstrap THIS_HOST:6881\n"
                               "  pubmote dht node --bind 127.0.0.1 --port 6881 "
                               "--bootstrap 127.0.0.1:6882",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    common(n)
    n.set_defaults(run=_node)


def _no_action(parser: argparse.ArgumentParser) -> Any:
    def run(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2
    return run


def _addrs(specs: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for spec in specs or list(PUBLIC_ROUTERS):
        host, port = parse_hostport(spec)
        try:
            infos = socket.getaddrinfo(host, port, socket.AF_INET,
                                       socket.SOCK_DGRAM)
        except OSError as e:
            if specs:
                raise ValueError("cannot resolve %s: %s" % (spec, e)) from None
            continue  # a public router that does not resolve: try the others
        out.append((str(infos[0][4][0]), int(infos[0][4][1])))
    if not out:
        raise NoAnswer("no bootstrap node could be resolved (%s): no name service here? "
                       "give --bootstrap HOST:PORT" % ", ".join(PUBLIC_ROUTERS))
    return out


class NoAnswer(Exception):
    """No DHT node answered: nothing was looked up, stored or joined."""


def _wrap(args: argparse.Namespace, coro: Any) -> int:
    try:
        code: int = run_async(lambda: coro(args))
    except NoAnswer as e:
        print("pubmote dht: %s" % e, file=sys.stderr)
        return 1
    except ValueError as e:
        print("pubmote dht: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("pubmote dht: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


async def _start(args: argparse.Namespace, *, read_only: bool = True) -> Any:
    from pubmote.dht.node import DhtNode

    # one-shot actions are BEP 43 read-only: nodes do not keep us after we exit
    node = DhtNode(host=args.bind, port=args.port, query_timeout_s=args.timeout,
                   read_only=read_only)
    await node.start()
    addrs = _addrs(args.bootstrap)
    if not await node.bootstrap(addrs):
        await node.close()
        raise NoAnswer(_no_answer(args, addrs))
    return node


def _no_answer(args: argparse.Namespace, addrs: list[tuple[str, int]]) -> str:
    where = ", ".join("%s:%d" % a for a in addrs[:3]) + (" ..." if len(addrs) > 3 else "")
    hint = ("is a DHT node running there? `pubmote dht node --port PORT` starts one"
            if args.bootstrap else "")
    if args.bind in ("127.0.0.1", "::1", "localhost") and not all(
            h.startswith("127.") or h == "::1" for h, _ in addrs):
        hint = "this node binds %s (the default): give --bind 0.0.0.0 to reach other " \
               "hosts" % args.bind
    return "no DHT node answered (bootstrap %s within %g s)%s" % (
        where, args.timeout, ": " + hint if hint else "")


def _show(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            text = value.decode()
        except UnicodeDecodeError:
            return "hex:" + value.hex()
        return text if text.isprintable() else "hex:" + value.hex()
    return repr(value)


def _keygen(args: argparse.Namespace) -> int:
    from pubmote.dht.bep44 import KeyPair

    try:
        kp = KeyPair.load(args.key_file, create=True)
    except (OSError, ValueError) as e:
        print("pubmote dht keygen: %s" % e, file=sys.stderr)
        return 1
    print(kp.public.hex())
    return 0


def _put(args: argparse.Namespace) -> int:
    if args.hex:
        try:
            kinds.hex_bytes(args.value)
        except kinds.KindError as e:
            print("pubmote dht put: VALUE %s: %s" % (kinds.show(args.value), e),
                  file=sys.stderr)
            return 2
    return _wrap(args, _put_async)


async def _put_async(args: argparse.Namespace) -> int:
    from pubmote.dht import bep44
    from pubmote.dht.bep50 import TopicOverlay

    kp = bep44.KeyPair.load(args.key_file)
    salt = args.salt.encode()
    value = bytes.fromhex("".join(args.value.split())) if args.hex else args.value.encode()
    node = await _start(args)
    try:
        seq = args.seq
        if seq is None:
            cur = await node.get_mutable(kp.public, salt)
            seq = cur.seq + 1 if cur is not None else 1
        item = bep44.sign_item(kp, value, seq, salt)
        # BEP 50: push it to the topic's subscribers too; a one-shot publisher meets the
        # members but does not announce itself, it will not be around to forward
        ov = TopicOverlay(node, kp.public, salt)
        await ov.join(announce=False)
        if ov.item is None or ov.item.seq < seq:
            await ov.publish(item)
        n = await node.put_mutable(item)
    finally:
        await node.close()
    if not n:
        print("pubmote dht put: the DHT answered but no node stored the item (target %s seq "
              "%d): none of them took a put" % (item.target.hex(), seq), file=sys.stderr)
        return 1
    print("target %s seq %d stored on %d nodes" % (item.target.hex(), seq, n))
    return 0


def _get(args: argparse.Namespace) -> int:
    return _wrap(args, _get_async)


async def _get_async(args: argparse.Namespace) -> int:
    key = _pubkey(args.pubkey)
    node = await _start(args)
    try:
        item = await node.get_mutable(key, args.salt.encode())
    finally:
        await node.close()
    if item is None:
        print("pubmote dht get: the DHT answered, but none of its nodes holds an item for "
              "that key and salt", file=sys.stderr)
        return 1
    print("seq %d: %s" % (item.seq, _show(item.value())))
    return 0


def _subscribe(args: argparse.Namespace) -> int:
    return _wrap(args, _subscribe_async)


async def _subscribe_async(args: argparse.Namespace) -> int:
    from pubmote.dht import bep44
    from pubmote.dht.bep50 import TopicOverlay

    key = _pubkey(args.pubkey)
    done = asyncio.Event()
    seen = 0

    def on_update(item: bep44.MutableItem) -> None:
        nonlocal seen
        seen += 1
        print("seq %d: %s" % (item.seq, _show(item.value())), flush=True)
        if args.count is not None and seen >= args.count:
            done.set()

    node = await _start(args, read_only=False)  # a member: others push to us
    try:
        ov = TopicOverlay(node, key, args.salt.encode(), on_update=on_update)
        members = await ov.join()
        print("joined topic %s: %d members known" % (ov.target.hex(), members),
              file=sys.stderr, flush=True)
        await done.wait()
    except asyncio.CancelledError:  # Ctrl-C
        print("pubmote dht subscribe: %d value%s" % (seen, "" if seen == 1 else "s"),
              file=sys.stderr, flush=True)
        raise
    finally:
        await node.close()
    return 0


def _node(args: argparse.Namespace) -> int:
    return _wrap(args, _node_async)


async def _node_async(args: argparse.Namespace) -> int:
    from pubmote.dht.node import DhtNode

    node = DhtNode(host=args.bind, port=args.port, query_timeout_s=args.timeout)
    await node.start()
    try:
        print("dht node %s:%d id %s" % (node.host, node.port, node.node_id.hex()), flush=True)
        if args.bootstrap:
            await node.bootstrap(_addrs(args.bootstrap))
        await asyncio.Event().wait()  # until Ctrl-C (asyncio.run: KeyboardInterrupt)
    finally:
        await node.close()
    return 0


def _pubkey(text: str) -> bytes:
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError("--pubkey must be 64 hex digits (a 32-byte ed25519 public key)")
    return key
