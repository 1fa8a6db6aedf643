"""The bridge as a node of the gateway mesh: the hub on one side, GossipSub on the other.

- Every message that boards, SP publishers or NDN apps publish on this bridge goes into
  the mesh in an envelope (envelope.py) on its realm's gossip topic (realm.py).
- Messages from the mesh enter the hub with ingress "mesh": boards, SP subscribers and NDN
  apps get them like local ones. They are never published into the mesh again (no loops);
  duplicates (by origin gateway, epoch and sequence number) are dropped and gaps counted.
- Directed messages (supernode addressing, directed.py) are published on the board topic
  /pubmote/to/<address> with `<topic>|<body>` (or a CBOR map {"t", "p"}) as payload; the
  hub hands them here instead of fanning them out. Each receiver gets them on
  /pubmote/to/<address> as a CBOR map {"a": address, "o": originator, "t": topic,
  "p": body, "ts": ms}. Directed routing works on a bridge without a mesh too (its own
  boards and applications).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

from pubmote.core import cbor
from pubmote.core.addresses import log_exposure
from pubmote.core.hub import Hub, Message
from pubmote.core.limits import Limits
from pubmote.gateway.mesh.directed import (
    DIRECTED_PREFIX,
    Address,
    DirectedAddressError,
    Originator,
    Plan,
    address_from_topic,
    check_name,
    parse_address,
    parse_originator,
    plan,
    topic_of,
)
from pubmote.gateway.mesh.directed import gossip_topic as directed_topic
from pubmote.gateway.mesh.envelope import DUPLICATE, STALE, Envelope, EnvelopeError, GapTracker

log = logging.getLogger("pubmote.mesh.gateway")

INGRESS = "mesh"           # Message.ingress of what came from the mesh (never sent back)
DIRECTED_INGRESS = "directed"
NOT_MESHED = ("dht", INGRESS, DIRECTED_INGRESS)
OUT_QUEUE = 8192           # envelopes waiting for the router; beyond, dropped and counted
PEER_CHECK_S = 1.0
PEER_BACKOFF_CAP_S = 5.0
STATS_LOG_S = 30.0


class DirectedError(ValueError):
    """A directed message this gateway cannot route (the reason says why)."""


def parse_directed_payload(payload: bytes) -> tuple[str, bytes, int | None]:
    """What a sender puts in a directed message: `<topic>|<body>`, or a CBOR map with "t"
    (topic, text) and "p" (body, bytes) and optionally "ts" (ms) -> (topic, body, ts)."""
    if payload[:1] and 0xA0 <= payload[0] <= 0xBF:
        try:
            m = cbor.loads(payload)
        except cbor.CborError as e:
            raise DirectedError("directed payload: %s" % e) from None
        if not isinstance(m, dict) or not isinstance(m.get("t"), str) \
                or not isinstance(m.get("p", b""), bytes):
            raise DirectedError("directed CBOR payload needs t (text) and p (bytes)")
        ts = m.get("ts")
        if ts is not None and (type(ts) is not int or ts < 0):
            raise DirectedError("directed ts must be a non-negative int")
        topic, body = m["t"], m.get("p", b"")
    else:
        t, sep, body = payload.partition(b"|")
        if not sep:
            raise DirectedError("directed payload is neither <topic>|<body> nor CBOR")
        try:
            topic = t.decode()
        except UnicodeDecodeError:
            raise DirectedError("directed topic is not UTF-8") from None
        ts = None
    if not topic.startswith("/") or len(topic) > 512:
        raise DirectedError("directed topic %r must be a URI starting with /" % topic[:64])
    return topic, body, ts


def directed_payload(address: Address | str, originator: Originator | str, topic: str,
                     body: bytes, ts_ms: int) -> bytes:
    """The payload receivers get: CBOR {"a", "o", "t", "p", "ts"}."""
    return cbor.dumps({"a": str(address), "o": str(originator), "t": topic, "p": body,
                       "ts": ts_ms})


class GatewayMesh:
    """Directed routing on this bridge, and (with a libp2p host) the mesh."""

    def __init__(self, hub: Hub, *, name: str, realm: Any = None, host: Any = None,
                 gossip_config: Any = None, peers: Sequence[str] = (),
                 roots: Sequence[str] = ("*",), out_queue: int = OUT_QUEUE) -> None:
        self.hub = hub
        self.name = check_name(name, "gateway")
        self.realm = realm            # mesh.realm.Realm, with a mesh
        self.host = host              # mesh.Host, with a mesh
        self.gossip_config = gossip_config
        self.peer_addrs = list(peers)
        self.roots = list(roots)
        self.gs: Any = None           # mesh.gossipsub.GossipSub once started
        self.validators: Any = None   # mesh.realm.Validators
        self.tracker = GapTracker()
        self.epoch = int(time.time() * 1000)
        self._seq: dict[str, int] = {}
        self._out: deque[tuple[str, bytes]] = deque()
        self._out_max = out_queue
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_gap_log = 0.0
        self._last_name_log = 0.0
        self._names: OrderedDict[str, Any] = OrderedDict()  # gateway name -> its PeerId
        self.counters = {"out": 0, "out_dropped": 0, "out_failed": 0, "in": 0,
                         "in_duplicates": 0, "in_stale": 0, "in_bad": 0, "not_meshed": 0,
                         "in_refused": 0,
                         "name_conflicts": 0, "loops": 0, "directed_in": 0, "directed_local": 0,
                         "directed_out": 0, "directed_bad": 0, "directed_loops": 0,
                         "directed_unknown_board": 0, "directed_no_mesh": 0}

    @property
    def meshed(self) -> bool:
        return self.host is not None

    # ---- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        self.hub.add_publish_hook(self._on_publish_hook)
        if self.host is None:
            return
        from pubmote.gateway.mesh.realm import PUB, Validators, gossip_topic
        from pubmote.p2p.pubsub.router import GossipSub

        self.host.add_event_handler(self._on_peer_event)
        await self.host.start()
        self.gs = GossipSub(self.host, self.gossip_config)
        await self.gs.start()
        self._names[self.name] = self.host.peer_id
        realm = self.realm.name
        v = Validators(self.realm)
        v.add("/%s/%s/" % (realm, PUB), v.pub_validator, prefix=True)
        v.add("/%s/to/" % realm, v.to_validator, prefix=True)
        self.validators = v
        # one validator for the whole realm: the realm check first, then the topic's own
        self.gs.set_validator("/%s/" % realm, v.validate, prefix=True)
        for root in self.roots:
            self.gs.subscribe(gossip_topic(realm, PUB, root), self._on_gossip)
        self.gs.subscribe(directed_topic(realm), self._on_gossip)
        self.hub.add_listener(self._on_hub_message)
        self._tasks.append(asyncio.create_task(self._sender()))
        self._tasks.append(asyncio.create_task(self._log_stats()))
        for a in self.peer_addrs:
            self._tasks.append(asyncio.create_task(self._keep_peer(a)))
        log.info("mesh: gateway %s, PeerId %s, listening on %s; %s; gossip topics %s",
                 self.name, self.host.peer_id,
                 ", ".join(str(a.with_p2p(str(self.host.peer_id)))
                           for a in self.host.listen_addrs) or "nothing",
                 self.realm.describe(), ", ".join(self.gs.subscriptions()))

    def _on_peer_event(self, ev: Any) -> None:
        """Peers joining and leaving, in the log (their number is in the status line)."""
        from pubmote.p2p.events import CONNECTED, DISCONNECTED

        if ev.kind == CONNECTED:
            log.info("mesh: peer %s joined (%s, %s); %d peers", ev.peer_id,
                     ev.connection.direction, ev.connection.remote_addr,
                     len(self.host.connected_peers()))
        elif ev.kind == DISCONNECTED:
            log.info("mesh: peer %s left; %d peers", ev.peer_id,
                     len(self.host.connected_peers()))

    async def close(self) -> None:
        self.hub.remove_publish_hook(self._on_publish_hook)
        self.hub.remove_listener(self._on_hub_message)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.gs is not None:
            await self.gs.stop()
            self.gs = None
        if self.host is not None:
            await self.host.close()

    async def _keep_peer(self, addr: str) -> None:
        """Stay connected to a configured peer: redial with jittered, capped backoff."""
        from pubmote.p2p import MeshError, Multiaddr, PeerId

        try:
            ma = Multiaddr(addr)
            pid = PeerId.from_base58(ma.peer_id_text() or "")
        except ValueError as e:  # the config check refuses these; never die unseen
            log.error("mesh: --mesh-peer %s is not /ip4/HOST/tcp/PORT/p2p/PEERID (%s); not "
                      "dialled", addr, e)
            return
        failures = 0
        while True:
            if self.host.connection(pid) is None:
                try:
                    await self.host.connect(ma, timeout_s=5.0)
                except (TimeoutError, MeshError, OSError) as e:
                    failures += 1
                    if failures in (1, 10) or failures % 100 == 0:
                        log.info("mesh: peer %s unreachable (%s); retrying", addr, e)
                    delay = min(PEER_BACKOFF_CAP_S, 0.2 * (2 ** min(failures, 6)))
                    await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                    continue
                if failures:
                    log.info("mesh: peer %s reached after %d failed dials", addr, failures)
                failures = 0
            await asyncio.sleep(PEER_CHECK_S)

    async def _log_stats(self) -> None:
        last: dict[str, int] = {}
        while True:
            await asyncio.sleep(STATS_LOG_S)
            now = dict(self.tracker.counters)
            if now != last:
                log.info("mesh: %d out, %d in; gaps %d (lost %d), duplicates %d, stale %d, "
                         "out dropped %d", self.counters["out"], self.counters["in"],
                         now["gaps"], self.tracker.lost, now["duplicates"], now["stale"],
                         self.counters["out_dropped"])
                last = now

    # ---- hub -> mesh ------------------------------------------------------------------

    def _on_hub_message(self, msg: Message) -> None:
        if msg.ingress in NOT_MESHED or msg.topic.startswith(DIRECTED_PREFIX):
            return
        from pubmote.gateway.mesh.realm import pub_topic

        topic = pub_topic(self.realm.name, msg.topic, self.roots)
        if topic is None:
            self.counters["not_meshed"] += 1
            return
        env = Envelope(topic=msg.topic.decode(errors="replace"), payload=msg.payload,
                       board=msg.origin[:200], gateway=self.name,
                       ts_ms=int(msg.t_recv * 1000), epoch=self.epoch, seq=0,
                       taken_ms=msg.t_taken)
        self._send(topic, env)

    def _send(self, topic: str, env: Envelope) -> None:
        # the sequence number is taken even when the envelope is dropped below: receivers
        # then count the gap, so a loss is visible on both sides
        env.seq = self._seq.get(topic, 0) + 1
        self._seq[topic] = env.seq
        try:
            data = env.encode()
        except EnvelopeError as e:
            self.counters["out_failed"] += 1
            log.warning("mesh: cannot send %r: %s", env.topic, e)
            return
        if len(self._out) >= self._out_max:
            self.counters["out_dropped"] += 1
            return
        self._out.append((topic, data))
        self._wake.set()

    async def _sender(self) -> None:
        from pubmote.p2p.pubsub.router import PublishRejected

        n = 0
        while True:
            while not self._out:
                self._wake.clear()
                await self._wake.wait()
            topic, data = self._out.popleft()
            try:
                await self.gs.publish(topic, data)
                self.counters["out"] += 1
            except (PublishRejected, ValueError) as e:
                self.counters["out_failed"] += 1
                log.warning("mesh: publish on %s failed: %s", topic, e)
            n += 1
            if n % 32 == 0:
                await asyncio.sleep(0)  # let the rest of the bridge run during a burst

    # ---- mesh -> hub ------------------------------------------------------------------

    def _on_gossip(self, gm: Any) -> None:
        env = self.validators.take(gm)
        if env is None:
            self.counters["in_bad"] += 1
            return
        self._check_name(env.gateway, gm.from_peer)
        if env.gateway == self.name:
            # our own message come back (replayed by another peer): never delivered twice
            self.counters["directed_loops" if env.directed else "loops"] += 1
            return
        # keyed by the signing peer (StrictSign: the router verified it) with the name it
        # claims: an envelope only moves the window of the key that signed it, so nobody
        # can make this gateway drop another's messages with a forged epoch or sequence
        # number. Another peer claiming a name is counted and logged (_check_name)
        verdict = self.tracker.observe((gm.from_peer, env.gateway, gm.topic), env.epoch,
                                       env.seq)
        if verdict == DUPLICATE:
            self.counters["in_duplicates"] += 1
            return
        if verdict == STALE:
            self.counters["in_stale"] += 1
            return
        self._note_gaps()
        # a topic that requires boards' signatures comes only from a closed realm's
        # members: in an open one anybody could have written the envelope
        if self.realm is not None and self.realm.open and self.hub.unsigned_refused(
                env.topic.encode(), "mesh envelope claiming %s in the open realm %s"
                % (env.gateway, self.realm.name)):
            self.counters["in_refused"] += 1
            return
        self.counters["in"] += 1
        if env.directed:
            self._directed_from_mesh(env)
            return
        self.hub.publish(Message(env.topic.encode(), env.payload,
                                 "%s/%s" % (env.gateway, env.board), INGRESS,
                                 t_taken=env.taken_ms))

    def _check_name(self, gateway: str, peer: Any) -> None:
        """Gateway names must be unique in a realm: count and log a second key using one."""
        known = self._names.get(gateway)
        if known is None:
            if len(self._names) >= 4096:
                self._names.popitem(last=False)
            self._names[gateway] = peer
        elif known != peer:
            self.counters["name_conflicts"] += 1
            if time.monotonic() - self._last_name_log > 5.0:  # a misconfiguration, not a flood
                self._last_name_log = time.monotonic()
                log.warning("mesh: gateway name %s used by %s and by %s (%d times so far)",
                            gateway, known, peer, self.counters["name_conflicts"])
            self._names[gateway] = peer

    def _note_gaps(self) -> None:
        t = self.tracker.counters
        gaps = t["gaps"]
        if gaps != self.hub.counters.get("mesh_gaps", 0) and time.monotonic() - self._last_gap_log > 5.0:
            self._last_gap_log = time.monotonic()
            log.warning("mesh: %d messages missing from origins so far (%d arrived late)",
                        gaps, t["late"])
        self.hub.set_counters({"mesh_gaps": gaps, "mesh_lost": self.tracker.lost,
                               "mesh_duplicates": t["duplicates"]})

    # ---- directed messages --------------------------------------------------------------

    def _on_publish_hook(self, msg: Message) -> bool:
        if not msg.topic.startswith(DIRECTED_PREFIX):
            return False
        try:
            address = address_from_topic(msg.topic)
            topic, body, ts = parse_directed_payload(msg.payload)
            originator = self._originator_of(msg)
        except (DirectedAddressError, DirectedError) as e:
            self.counters["directed_bad"] += 1
            log.warning("directed message on %s from %s refused: %s",
                        msg.topic.decode(errors="replace"), msg.origin, e)
            return True
        assert address is not None
        self.route(address, originator, topic, body,
                   ts if ts is not None else int(msg.t_recv * 1000))
        return True

    def _originator_of(self, msg: Message) -> Originator:
        """A board of ours sends as /<me>/<board>; SP and NDN applications as /<me>."""
        b = self.hub.board(msg.origin)
        if b is not None and b.face_label == msg.ingress:
            return Originator(self.name, b.name)
        return Originator(self.name)

    def send(self, address: str, topic: str, body: bytes, *, board: str | None = None) -> Plan:
        """Send a directed message as this gateway (or as its board `board`)."""
        return self.route(parse_address(address), Originator(self.name, board), topic, body,
                          int(time.time() * 1000))

    def route(self, address: Address, originator: Originator, topic: str, body: bytes,
              ts_ms: int) -> Plan:
        """Deliver a locally sent directed message here and send it into the mesh."""
        p = plan(address, originator, self.name, self.hub.board_names(), from_mesh=False)
        self.counters["directed_local"] += 1
        self._deliver(address, originator, topic, body, ts_ms, p, DIRECTED_INGRESS)
        if p.mesh:
            if self.gs is None:
                self.counters["directed_no_mesh"] += 1
                log.info("directed message to %s: this gateway has no mesh", address)
            else:
                self.counters["directed_out"] += 1
                env = Envelope(topic=topic, payload=body, board=originator.node or "",
                               gateway=self.name, ts_ms=ts_ms, epoch=self.epoch, seq=0,
                               address=str(address), originator=str(originator))
                self._send(directed_topic(self.realm.name), env)
        return p

    def _directed_from_mesh(self, env: Envelope) -> None:
        try:
            address = parse_address(env.address or "")
            originator = parse_originator(env.originator or "")
        except DirectedAddressError as e:  # the validator checked; a bug if it gets here
            self.counters["directed_bad"] += 1
            log.warning("directed message from the mesh refused: %s", e)
            return
        p = plan(address, originator, self.name, self.hub.board_names(), from_mesh=True)
        if p.loop:
            self.counters["directed_loops"] += 1
            log.info("directed message to %s by %s came back to its originator; dropped",
                     address, originator)
            return
        self.counters["directed_in"] += 1
        self._deliver(address, originator, env.topic, env.payload, env.ts_ms, p, INGRESS)

    def _deliver(self, address: Address, originator: Originator, topic: str, body: bytes,
                 ts_ms: int, p: Plan, ingress: str) -> None:
        if address.orch == self.name and address.node not in (None, "*") \
                and self.hub.board(address.node) is None \
                and not (originator.orch == self.name and originator.node == address.node):
            self.counters["directed_unknown_board"] += 1
            log.info("directed message to %s: no board %s here", address, address.node)
        known = set(self.hub.board_names())
        boards = [n for n in p.boards if n in known]
        if not p.apps and not boards:
            return
        msg = Message(topic_of(address),
                      directed_payload(address, originator, topic, body, ts_ms),
                      str(originator), ingress)
        self.hub.publish(msg, boards, listeners=p.apps)

    # ---- figures ------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out["tracker"] = dict(self.tracker.counters, lost=self.tracker.lost,
                              origins=len(self.tracker))
        out["queue"] = len(self._out)
        if self.gs is not None:
            out["gossipsub"] = dict(self.gs.counters)
            out["peers"] = [str(p) for p in self.gs.peers()]
            out["mesh_peers"] = {t: len(self.gs.mesh_peers(t)) for t in self.gs.subscriptions()}
        if self.validators is not None:
            out["validators"] = dict(self.validators.counters)
            out["realm"] = dict(self.realm.counters)
        return out


def mesh_enabled(cfg: dict[str, Any]) -> bool:
    return bool(cfg.get("mesh_listen") or cfg.get("mesh_peer"))


async def from_config(hub: Hub, cfg: dict[str, Any]) -> GatewayMesh:
    """A started GatewayMesh from the bridge's config (mesh_listen, mesh_peer, realm,
    realm_member, mesh_key_file, mesh_topic, mesh_out_queue; the gateway name is
    `gateway`)."""
    def listed(v: Any) -> list[str]:
        return [v] if isinstance(v, str) else [str(x) for x in (v or [])]

    name = str(cfg["gateway"])
    if not mesh_enabled(cfg):
        gm = GatewayMesh(hub, name=name)
        await gm.start()
        return gm
    from pubmote.gateway.mesh.keyfile import default_key_file
    from pubmote.gateway.mesh.realm import Realm, check_roots, load_members
    from pubmote.p2p import Backoff, Host, HostConfig, Multiaddr, load_or_create_key
    from pubmote.p2p.pubsub.router import GossipConfig

    given = cfg.get("mesh_key_file")
    key = load_or_create_key(given or default_key_file(), make_dirs=not given)
    peers = listed(cfg.get("mesh_peer"))
    for p in peers:
        if Multiaddr(p).peer_id_text() is None:
            raise ValueError("mesh peer %s needs a /p2p/PEERID part (see `pubmote mesh id`)"
                             % p)
    realm = Realm(str(cfg.get("realm") or "pubmote"), load_members(listed(cfg.get("realm_member"))),
                  self_id=key.peer_id)
    if realm.open:
        log.warning("%s", realm.describe())
    for a in listed(cfg.get("mesh_listen")):
        log_exposure(log, "the mesh listener", a, Multiaddr(a).tcp_host_port()[0],
                     "peers authenticate with Noise; %s" % (
                         "anyone may publish into the open realm" if realm.open
                         else "only the realm's members publish"))
    lim = Limits.from_config(cfg)
    # configured gateway peers are few: redial them within seconds, not the default minute
    host = Host(key, listen_addrs=listed(cfg.get("mesh_listen")),
                config=HostConfig(backoff=Backoff(base_s=0.2, cap_s=PEER_BACKOFF_CAP_S),
                                  max_connections=lim.mesh_max_connections,
                                  max_pending_inbound=lim.mesh_max_pending_inbound,
                                  max_inbound_per_ip=lim.mesh_max_inbound_per_ip,
                                  handshake_timeout_s=lim.mesh_handshake_timeout_s))
    gm = GatewayMesh(hub, name=name, realm=realm, host=host, gossip_config=GossipConfig(),
                     peers=peers, roots=check_roots(listed(cfg.get("mesh_topic")) or ["*"]),
                     out_queue=int(cfg.get("mesh_out_queue") or OUT_QUEUE))
    try:
        await gm.start()
    except BaseException:
        await gm.close()
        raise
    return gm
