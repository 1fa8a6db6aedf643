// The js-libp2p peer of pubmote's mesh interop tests and bench: a libp2p 3 node (TCP,
// Noise, Yamux, identify, ping) with echo/sink protocols, driven by JSON lines on stdin.
//   node peer.mjs [--port N]      serve; print {"event":"ready",...}; answer commands
//   node peer.mjs --gossip [--gossip-opts JSON]   also run @libp2p/gossipsub (gs_* commands)
//   node peer.mjs --bench-self    two nodes in this process: throughput and ping rate
import './polyfill.mjs'
import { createInterface } from 'node:readline'
import { createLibp2p } from 'libp2p'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { tcp } from '@libp2p/tcp'
import { identify, identifyPush } from '@libp2p/identify'
import { ping } from '@libp2p/ping'
import { gossipsub } from '@libp2p/gossipsub'
import { peerIdFromString } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'

const ECHO = '/pubmote/echo/1.0.0'
const SINK = '/pubmote/sink/1.0.0'
const PING = '/ipfs/ping/1.0.0'
const STREAM_LIMITS = { maxInboundStreams: 4096, maxOutboundStreams: 4096 }

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }
function bytesOf (chunk) { return chunk instanceof Uint8Array ? chunk : chunk.subarray() }

// Exact reads over a v3 message stream's async iterator.
class Reader {
  constructor (stream) { this.it = stream[Symbol.asyncIterator](); this.buf = new Uint8Array(0) }
  async readExactly (n) {
    while (this.buf.length < n) {
      const { value, done } = await this.it.next()
      if (done) throw new Error(`EOF after ${this.buf.length} of ${n} bytes`)
      const b = bytesOf(value)
      const nb = new Uint8Array(this.buf.length + b.length)
      nb.set(this.buf); nb.set(b, this.buf.length); this.buf = nb
    }
    const r = this.buf.subarray(0, n); this.buf = this.buf.subarray(n); return r
  }
}

async function send (stream, data) {
  if (!stream.send(data)) await stream.onDrain()
}

async function makeNode (port, gossipOpts) {
  const services = { identify: identify(), identifyPush: identifyPush(), ping: ping() }
  if (gossipOpts) {
    // StrictSign (the default), no self-delivery; publishing before a peer subscribed is
    // not an error, as in pubmote (the tests and bench count deliveries themselves).
    services.pubsub = gossipsub({
      allowPublishToZeroTopicPeers: true,
      emitSelf: false,
      ignoreDuplicatePublishError: true,
      ...gossipOpts
    })
  }
  const node = await createLibp2p({
    addresses: { listen: [`/ip4/127.0.0.1/tcp/${port}`] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services,
    // the tests dial this peer from 127.0.0.1 many times a second: js-libp2p's defaults
    // (5 inbound connections per host per second, 10 pending upgrades) refuse some of them
    connectionManager: {
      maxConnections: 256,
      inboundConnectionThreshold: 10000,
      maxIncomingPendingConnections: 256
    }
  })
  await node.handle(ECHO, async (stream) => {
    for await (const chunk of stream) await send(stream, bytesOf(chunk))
    await stream.close()
  }, STREAM_LIMITS)
  await node.handle(SINK, async (stream) => {
    let total = 0
    for await (const chunk of stream) total += chunk.byteLength
    const ack = new Uint8Array(8)
    new DataView(ack.buffer).setBigUint64(0, BigInt(total))
    await send(stream, ack)
    await stream.close()
  }, STREAM_LIMITS)
  return node
}

function target (node, cmd) {
  if (cmd.addr) return multiaddr(cmd.addr)
  return peerIdFromString(cmd.peer)
}

async function pingRounds (node, tgt, count) {
  const stream = await node.dialProtocol(tgt, PING)
  const reader = new Reader(stream)
  const rtts = []
  for (let i = 0; i < count; i++) {
    const data = crypto.getRandomValues(new Uint8Array(32))
    const t0 = performance.now()
    await send(stream, data)
    const echo = await reader.readExactly(32)
    rtts.push(performance.now() - t0)
    if (Buffer.compare(Buffer.from(echo), Buffer.from(data)) !== 0) throw new Error('ping echo differs')
  }
  await stream.close()
  return rtts
}

function pattern (size, seed) {
  const b = new Uint8Array(size)
  for (let i = 0; i < size; i++) b[i] = (i * 31 + seed) & 0xff
  return b
}

async function echoOnce (node, tgt, size, chunk, seed) {
  const stream = await node.dialProtocol(tgt, ECHO)
  const data = pattern(size, seed)
  const reader = new Reader(stream)
  const writer = (async () => {
    for (let off = 0; off < size; off += chunk) await send(stream, data.subarray(off, Math.min(size, off + chunk)))
  })()
  const back = await reader.readExactly(size)
  await writer
  await stream.close()
  if (Buffer.compare(Buffer.from(back), Buffer.from(data)) !== 0) throw new Error('echo differs')
  return true
}

async function sinkTransfer (node, tgt, size, chunk) {
  const stream = await node.dialProtocol(tgt, SINK)
  const block = new Uint8Array(chunk)
  const t0 = performance.now()
  for (let off = 0; off < size; off += chunk) await send(stream, block.subarray(0, Math.min(chunk, size - off)))
  await stream.close()
  const reader = new Reader(stream)
  const ack = await reader.readExactly(8)
  const ms = performance.now() - t0
  const got = Number(new DataView(ack.buffer, ack.byteOffset, 8).getBigUint64(0))
  return { ms, got }
}

const identified = new Map()

// -- gossipsub: received messages per topic (bounded), bench latencies ------------------
// bench payload: u32 (epoch << 16 | publisher index), u32 seq, f64 send time (s since the
// epoch); receivers keep per-epoch counts and skip their own messages.
const received = new Map()   // topic -> [{from, data, seqno, source}]
const bench = new Map()      // topic -> {self, epochs: Map(epoch -> {count, dups, lat, keys})}
const MAX_KEPT = 10000
const hex = (b) => Buffer.from(b).toString('hex')
const nowS = () => (performance.timeOrigin + performance.now()) / 1000

function epochStats (b, epoch) {
  let st = b.epochs.get(epoch)
  if (!st) { st = { count: 0, dups: 0, lat: [], keys: new Set() }; b.epochs.set(epoch, st) }
  return st
}

function onGossip (evt) {
  const { msg, propagationSource } = evt.detail
  const b = bench.get(msg.topic)
  if (b) {
    const dv = new DataView(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength)
    const tag = dv.getUint32(0)
    if ((tag & 0xffff) === b.self) return
    const st = epochStats(b, tag >>> 16)
    const key = tag * 4294967296 + dv.getUint32(4)
    if (st.keys.has(key)) st.dups++
    else {
      st.keys.add(key)
      st.count++
      st.lat.push((nowS() - dv.getFloat64(8)) * 1000)
    }
    return
  }
  let list = received.get(msg.topic)
  if (!list) { list = []; received.set(msg.topic, list) }
  if (list.length < MAX_KEPT) {
    list.push({
      from: msg.type === 'signed' ? msg.from.toString() : null,
      data: hex(msg.data),
      seqno: msg.type === 'signed' ? msg.sequenceNumber.toString(16) : null,
      source: propagationSource.toString()
    })
  }
}

function benchPayload (tag, seq, size) {
  const b = new Uint8Array(Math.max(16, size))
  const dv = new DataView(b.buffer)
  dv.setUint32(0, tag); dv.setUint32(4, seq); dv.setFloat64(8, nowS())
  return b
}

async function benchPublish (node, cmd) {
  // publish `count` messages at `rate` per second on a fixed schedule (no catch-up burst
  // hides a stall: late sends are counted)
  const ps = node.services.pubsub
  const t0 = performance.now()
  let late = 0
  for (let i = 0; i < cmd.count; i++) {
    const due = t0 + (i * 1000) / cmd.rate
    const wait = due - performance.now()
    if (wait > 0) await new Promise(r => setTimeout(r, wait))
    else if (wait < -50) late++
    await ps.publish(cmd.topic, benchPayload(((cmd.epoch ?? 0) << 16 | cmd.index) >>> 0, i, cmd.size ?? 16))
  }
  return { ms: performance.now() - t0, late }
}

async function waitIdentified (node, peer, ms) {
  const key = peer.toString()
  const t0 = Date.now()
  while (!identified.has(key) && Date.now() - t0 < ms) await new Promise(r => setTimeout(r, 20))
  return identified.get(key)
}

async function handle (node, cmd) {
  switch (cmd.cmd) {
    case 'dial': {
      const conn = await node.dial(multiaddr(cmd.addr))
      return { peer: conn.remotePeer.toString() }
    }
    case 'ping': {
      const rtts = await pingRounds(node, target(node, cmd), cmd.count ?? 1)
      return { rtts }
    }
    case 'ping_service': {
      const rtt = await node.services.ping.ping(target(node, cmd))
      return { rtt }
    }
    case 'identify': {
      const peer = peerIdFromString(cmd.peer)
      const evt = await waitIdentified(node, peer, cmd.timeout_ms ?? 5000)
      if (!evt) throw new Error('not identified')
      return evt
    }
    case 'echo': {
      await echoOnce(node, target(node, cmd), cmd.size, cmd.chunk ?? 65536, cmd.seed ?? 7)
      return { ok: true }
    }
    case 'streams': {
      const tgt = target(node, cmd)
      const t0 = performance.now()
      await Promise.all(Array.from({ length: cmd.count }, (_, i) => echoOnce(node, tgt, cmd.size, cmd.size, i)))
      return { ms: performance.now() - t0 }
    }
    case 'sink': {
      return await sinkTransfer(node, target(node, cmd), cmd.size, cmd.chunk ?? 65536)
    }
    case 'handle': {
      // a protocol registered while connected: js-libp2p pushes identify to its peers
      await node.handle(cmd.protocol, async (stream) => {
        for await (const chunk of stream) await send(stream, bytesOf(chunk))
        await stream.close()
      }, STREAM_LIMITS)
      return { ok: true }
    }
    case 'protocols': {
      const p = await node.peerStore.get(peerIdFromString(cmd.peer))
      return { protocols: p.protocols }
    }
    case 'connections': {
      return { peers: node.getConnections().map(c => c.remotePeer.toString()) }
    }
    case 'hangup': {
      await node.hangUp(peerIdFromString(cmd.peer))
      return { ok: true }
    }
    case 'gs_subscribe': {
      node.services.pubsub.subscribe(cmd.topic)
      return { ok: true }
    }
    case 'gs_unsubscribe': {
      node.services.pubsub.unsubscribe(cmd.topic)
      return { ok: true }
    }
    case 'gs_publish': {
      const res = await node.services.pubsub.publish(cmd.topic, Buffer.from(cmd.data, 'hex'))
      return { recipients: res.recipients.map(p => p.toString()) }
    }
    case 'gs_received': {
      return { messages: received.get(cmd.topic) ?? [] }
    }
    case 'gs_wait': {
      const t0 = Date.now()
      while ((received.get(cmd.topic) ?? []).length < cmd.count && Date.now() - t0 < (cmd.timeout_ms ?? 5000)) {
        await new Promise(r => setTimeout(r, 20))
      }
      return { messages: received.get(cmd.topic) ?? [] }
    }
    case 'gs_peers': {
      const ps = node.services.pubsub
      return {
        mesh: ps.getMeshPeers(cmd.topic),
        subscribers: ps.getSubscribers(cmd.topic).map(p => p.toString()),
        peers: ps.getPeers().map(p => p.toString())
      }
    }
    case 'gs_bench_start': {
      bench.set(cmd.topic, { self: cmd.index, epochs: new Map() })
      node.services.pubsub.subscribe(cmd.topic)
      return { ok: true }
    }
    case 'gs_bench_publish': {
      return await benchPublish(node, cmd)
    }
    case 'gs_bench_stats': {
      const b = bench.get(cmd.topic)
      const st = epochStats(b, cmd.epoch)
      const res = { count: st.count, dups: st.dups, lat: cmd.brief ? [] : st.lat }
      if (cmd.drop) for (const e of [...b.epochs.keys()]) if (e <= cmd.epoch) b.epochs.delete(e)
      return res
    }
    case 'stop': {
      await node.stop()
      setTimeout(() => process.exit(0), 10)
      return { ok: true }
    }
    default:
      throw new Error('unknown command ' + cmd.cmd)
  }
}

async function serve (port, gossipOpts) {
  const node = await makeNode(port, gossipOpts)
  if (gossipOpts) node.services.pubsub.addEventListener('gossipsub:message', onGossip)
  node.addEventListener('peer:identify', (evt) => {
    const r = evt.detail
    identified.set(r.peerId.toString(), {
      protocols: r.protocols,
      listenAddrs: r.listenAddrs.map(a => a.toString()),
      agentVersion: r.agentVersion,
      protocolVersion: r.protocolVersion,
      observedAddr: r.observedAddr ? r.observedAddr.toString() : null
    })
  })
  out({ event: 'ready', peer: node.peerId.toString(), addrs: node.getMultiaddrs().map(a => a.toString()) })
  const rl = createInterface({ input: process.stdin })
  rl.on('line', (line) => {
    let cmd
    try { cmd = JSON.parse(line) } catch { return }
    handle(node, cmd).then(
      (res) => out({ id: cmd.id, ok: true, ...res }),
      (err) => out({ id: cmd.id, ok: false, error: String(err && err.message ? err.message : err) }))
  })
  rl.on('close', () => { node.stop().finally(() => process.exit(0)) })
}

// Both ends in this process, as the pubmote bench runs two pubmote hosts in one.
async function benchSelf (sizeMb, pingSeconds) {
  const a = await makeNode(0)
  const b = await makeNode(0)
  const addr = b.getMultiaddrs()[0]
  await a.dial(addr)
  await sinkTransfer(a, b.peerId, 4 * 1024 * 1024, 65536) // warm-up
  const size = sizeMb * 1024 * 1024
  const { ms, got } = await sinkTransfer(a, b.peerId, size, 65536)
  if (got !== size) throw new Error(`sink got ${got} of ${size}`)
  const stream = await a.dialProtocol(b.peerId, PING)
  const reader = new Reader(stream)
  const data = new Uint8Array(32)
  let n = 0
  const t0 = performance.now()
  while (performance.now() - t0 < pingSeconds * 1000) {
    await send(stream, data)
    await reader.readExactly(32)
    n++
  }
  const pingMs = performance.now() - t0
  await stream.close()
  out({ throughput_mb_s: size / 1e6 / (ms / 1000), pings_per_s: n / (pingMs / 1000) })
  await a.stop(); await b.stop()
  process.exit(0)
}

const args = process.argv.slice(2)
if (args.includes('--bench-self')) {
  const i = args.indexOf('--size-mb')
  const j = args.indexOf('--ping-seconds')
  await benchSelf(i >= 0 ? Number(args[i + 1]) : 64, j >= 0 ? Number(args[j + 1]) : 2)
} else {
  const i = args.indexOf('--port')
  const g = args.indexOf('--gossip-opts')
  const gossipOpts = args.includes('--gossip') ? (g >= 0 ? JSON.parse(args[g + 1]) : {}) : null
  await serve(i >= 0 ? Number(args[i + 1]) : 0, gossipOpts)
}
