"""GossipSub's links to its peers: a peer is taken on when it connects (or identify says
it speaks pubsub), our outbound stream to it is opened once and drained of its queue in
batches, its inbound stream is read RPC by RPC (an oversized or malformed one resets the
stream and costs the peer score), and it is let go when its connection closes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pubmote.p2p.errors import MeshError, NegotiationError, ProtocolError, StreamReset, describe
from pubmote.p2p.events import CONNECTED, DISCONNECTED, IDENTIFIED, PeerEvent
from pubmote.p2p.host import Host
from pubmote.p2p.identity import PeerId
from pubmote.p2p.pubsub.config import GossipConfig
from pubmote.p2p.pubsub.mesh import Mesh
from pubmote.p2p.pubsub.peers import PeerTable
from pubmote.p2p.pubsub.rpc import RPC
from pubmote.p2p.pubsub.scores import PeerScores
from pubmote.p2p.pubsub.state import PeerState
from pubmote.p2p.yamux import Stream

log = logging.getLogger("pubmote.p2p.pubsub")

OnRpc = Callable[[PeerState, RPC], Awaitable[None]]


class PeerLinks:
    """The streams to and from each pubsub peer. From the router it is given `hello()`
    (the RPC that opens our stream, None when we subscribe to nothing), `on_rpc` (each
    RPC read), `spawn` (its tasks) and `running()`."""

    def __init__(self, *, host: Host, config: GossipConfig, peers: PeerTable,
                 scores: PeerScores, mesh: Mesh, counters: dict[str, int],
                 hello: Callable[[], bytes | None], on_rpc: OnRpc,
                 spawn: Callable[[Awaitable[None]], asyncio.Task[None]],
                 running: Callable[[], bool]) -> None:
        self._host = host
        self._config = config
        self._peers = peers
        self._scores = scores
        self._mesh = mesh
        self._counters = counters
        self._hello = hello
        self._on_rpc = on_rpc
        self._spawn = spawn
        self._running = running

    def on_peer_event(self, ev: PeerEvent) -> None:
        if not self._running():
            return
        if ev.kind == CONNECTED:
            self.add_peer(ev.peer_id)
        elif ev.kind == IDENTIFIED:
            # A peer that added pubsub later (identify push), or whose first negotiation
            # raced its own start-up.
            ps = self._peers.get(ev.peer_id)
            if ev.info is not None and any(p in ev.info.protocols
                                           for p in self._config.protocols):
                if ps is None:
                    self.add_peer(ev.peer_id)
                elif ps.writer is None or ps.writer.done():
                    self.start_writer(ps)
        elif ev.kind == DISCONNECTED:
            if self._host.connection(ev.peer_id) is None:
                self.remove_peer(ev.peer_id)

    def add_peer(self, peer: PeerId) -> PeerState:
        ps = self._peers.get(peer)
        if ps is not None:
            return ps
        ps = PeerState(peer)
        if len(self._peers) >= self._config.max_peers:
            log.info("gossipsub: peer limit reached; ignoring %s", peer)
            ps.closed = True
            return ps
        self._peers.add(ps)
        self._scores.record(peer)
        self.start_writer(ps)
        return ps

    def start_writer(self, ps: PeerState) -> None:
        ps.writer = self._spawn(self._writer(ps))

    def remove_peer(self, peer: PeerId, *, reset: bool = False) -> None:
        ps = self._peers.pop(peer)
        if ps is None:
            return
        ps.closed = True
        ps.wake.set()
        if ps.writer is not None and not ps.writer.done():
            ps.writer.cancel()
        for st in (ps.inbound, ps.stream):
            if st is not None and reset:
                st.reset()
        self._mesh.drop_peer(peer)
        self._scores.left(peer)

    # -- outbound ------------------------------------------------------------------------
    async def _writer(self, ps: PeerState) -> None:
        """Open our stream to the peer (once), say hello, then drain its queue in batches."""
        attempts = 0
        while not ps.closed:
            try:
                st = await self._host.new_stream(ps.peer_id, list(self._config.protocols),
                                                dial=False)
            except NegotiationError:
                if ps.inbound is None:
                    # Not a pubsub peer; forget it until identify says otherwise.
                    self._peers.pop(ps.peer_id)
                    ps.closed = True
                return
            except (TimeoutError, MeshError, OSError) as e:
                attempts += 1
                if self._host.connection(ps.peer_id) is None or attempts > 3:
                    log.debug("gossipsub: no stream to %s: %s", ps.peer_id, describe(e))
                    self.remove_peer(ps.peer_id)
                    return
                await asyncio.sleep(0.5 * attempts)
                continue
            ps.stream = st
            ps.protocol = st.protocol
            try:
                hello = self._hello()
                if hello is not None:
                    await st.write(hello)
                attempts = 0
                while not ps.closed:
                    if not ps.queue:
                        ps.wake.clear()
                        await ps.wake.wait()
                        continue
                    batch: list[bytes] = []
                    size = 0
                    while ps.queue and size < self._config.max_write_batch_bytes:
                        b = ps.queue.popleft()
                        batch.append(b)
                        size += len(b)
                    await st.write(b"".join(batch) if len(batch) > 1 else batch[0])
            except (StreamReset, MeshError, ConnectionError, OSError) as e:
                attempts += 1
                ps.stream = None
                if self._host.connection(ps.peer_id) is None or attempts > 3:
                    log.debug("gossipsub: stream to %s lost: %s", ps.peer_id, describe(e))
                    self.remove_peer(ps.peer_id)
                    return
                await asyncio.sleep(0.5 * attempts)

    # -- inbound -------------------------------------------------------------------------
    async def handle_stream(self, stream: Stream) -> None:
        peer = stream.remote_peer
        ps = self._peers.get(peer)
        if ps is None:
            ps = self.add_peer(peer)
        if ps.closed:
            stream.reset()
            return
        if ps.inbound is not None and ps.inbound is not stream:
            ps.inbound.reset()  # one inbound stream per peer: the newest wins
        ps.inbound = stream
        ps.inbound_protocol = stream.protocol
        if ps.writer is None or ps.writer.done():
            self.start_writer(ps)
        max_len = self._config.max_transmit_size
        while True:
            try:
                data = await stream.read_lp(max_len)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    log.debug("gossipsub: %s closed mid-RPC", peer)
                return
            except ProtocolError as e:
                self._counters["malformed_rpcs"] += 1
                self._scores.penalise_behaviour(peer, "oversized RPC")
                log.info("gossipsub: closing stream from %s: %s", peer, e)
                stream.reset()
                return
            try:
                rpc = RPC.decode(data, max_size=max_len)
            except ProtocolError as e:
                self._counters["malformed_rpcs"] += 1
                self._scores.penalise_behaviour(peer, "malformed RPC")
                log.info("gossipsub: malformed RPC from %s: %s; closing the stream", peer, e)
                stream.reset()
                return
            if ps.closed:
                return
            await self._on_rpc(ps, rpc)
