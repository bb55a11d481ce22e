/**
 * WsClient builds text frames itself and writes them to the socket (one frame
 * per event, shared by every client): over a real ws connection, every
 * payload length class (7-bit, 16-bit, 64-bit) arrives intact and in order
 * whether sent as a string or a Buffer, the same string or Buffer sent to two
 * clients reaches both, a committed batch (sendFrames) arrives whole and in
 * order at each of its clients, ws's own frames (ping,
 * close) keep their place among ours, and with permessage-deflate on the
 * client falls back to ws.send.
 */
import assert from 'node:assert/strict'
import type { AddressInfo, Socket } from 'node:net'
import { after, describe, it } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { WebSocket, WebSocketServer } from 'ws'
import { WsClient } from '../../src/ws/ws-client.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

interface Pair { server: WsClient, client: WebSocket, got: string[], events: string[], closed: Promise<number> }

describe('WsClient frames', () => {
  const servers: WebSocketServer[] = []
  after(() => { for (const s of servers) s.close() })

  async function pair (deflate = false): Promise<Pair> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: deflate })
    servers.push(wss)
    await new Promise<void>((resolve) => wss.once('listening', resolve))
    const accepted = new Promise<[WebSocket, Socket]>((resolve) => wss.once('connection', (ws, req) => resolve([ws, req.socket])))
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, { perMessageDeflate: deflate })
    const got: string[] = []
    const events: string[] = []
    client.on('message', (data, isBinary) => {
      assert.equal(isBinary, false, 'text frames')
      const text = data.toString()
      got.push(text)
      events.push(`message ${text.length}`)
    })
    client.on('ping', () => events.push('ping'))
    const closed = new Promise<number>((resolve) => client.once('close', (code) => resolve(code)))
    await new Promise<void>((resolve) => client.once('open', () => resolve()))
    const [ws, raw] = await accepted
    return { server: new WsClient(ws, raw, 1 << 30), client, got, events, closed }
  }

  const LENGTHS = [0, 1, 125, 126, 127, 65535, 65536, 70000]

  for (const deflate of [false, true]) {
    it(`delivers every length class intact and in order, ws's ping and close in their place${deflate ? ' (permessage-deflate: through ws.send)' : ''}`, async () => {
      const p = await pair(deflate)
      assert.equal(p.server.socket.extensions === '', !deflate)
      // Without an extension our frames bypass ws's Sender (ws frames only its own: ping, close).
      const sender = (p.server.socket as unknown as { _sender: { send: (...args: unknown[]) => void } })._sender
      let viaWs = 0
      const send = sender.send.bind(sender)
      sender.send = (...args: unknown[]) => { viaWs++; send(...args) }
      const sent: string[] = []
      for (const [i, n] of LENGTHS.entries()) {
        // Multi-byte characters: lengths in bytes differ from lengths in characters.
        const text = n === 0 ? '' : `${i}é`.padEnd(n - 1, 'x')
        // Each as a string (encoded straight behind the header) and as a Buffer (copied behind it).
        sent.push(text, text)
        p.server.send(text)
        p.server.send(Buffer.from(text))
        if (i === 3) p.server.socket.ping()
      }
      p.server.end('slow_consumer', 'bye')
      assert.equal(await p.closed, 4008)
      assert.deepEqual(p.got, sent)
      assert.equal(p.events.indexOf('ping'), 8, 'the ping after the eighth frame')
      assert.equal(viaWs, deflate ? 2 * LENGTHS.length : 0, 'frames sent through ws.send')
    })
  }

  for (const kind of ['string', 'Buffer']) {
    it(`sends one ${kind} to several clients (the broadcast case) as the same text to each`, async () => {
      const a = await pair()
      const b = await pair()
      const text = '{"seq":1,"type":"assistant","text":"ünïcode"}'
      const shared = kind === 'string' ? text : Buffer.from(text)
      for (const p of [a, b, a, b]) p.server.send(shared)
      const other = kind === 'string' ? '{"seq":2}' : Buffer.from('{"seq":2}')
      a.server.send(other)
      b.server.send(other)
      for (const p of [a, b]) p.server.end('shutting_down', 'done')
      await Promise.all([a.closed, b.closed])
      for (const p of [a, b]) assert.deepEqual(p.got, [text, text, other.toString()])
    })
  }

  it('a batch larger than the socket takes waits in the queue in whole frames, and arrives whole and in order once the client reads', async () => {
    const p = await pair()
    const raw = (p.client as unknown as { _socket: Socket })._socket
    raw.pause()
    // 30 batches of 60 frames of 4–8 KB, about 11 MB: more than the loopback socket's buffers hold, so the rest is queued.
    const batches = Array.from({ length: 30 }, (_b, b) => Array.from({ length: 60 }, (_v, i) => {
      const frame = `{"seq":${b * 60 + i + 1},"t":"${'é'.repeat(2000 + 37 * i)}"}`
      return { seq: b * 60 + i + 1, frame, bytes: Buffer.from(frame) }
    }))
    for (const batch of batches) p.server.sendFrames(batch)
    assert.ok(p.server.buffered() > 1024 * 1024, `frames wait behind the stalled socket (${p.server.buffered()} bytes)`)
    raw.resume()
    const all = batches.flat().map((e) => e.frame)
    await new Promise<void>((resolve) => p.client.on('message', () => { if (p.got.length === all.length) resolve() }))
    assert.deepEqual(p.got, all)
    p.server.end('shutting_down', 'done')
    assert.equal(await p.closed, 1012)
  })

  it('keeps no batch it sent alive: once its broadcast is over, the batch and its events can be collected', async () => {
    const a = await pair()
    const b = await pair()
    // Made and broadcast in a function of its own, so the test holds only a weak reference to it.
    const ref = ((): WeakRef<object> => {
      const batch = [1, 2, 3].map((seq) => ({ seq, frame: `{"seq":${seq}}`, bytes: Buffer.from(`{"seq":${seq}}`) }))
      for (const p of [a, b]) p.server.sendFrames(batch)
      return new WeakRef(batch)
    })()
    // The microtask after the broadcast lets go of the framing cache.
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    const kept = ref.deref() !== undefined
    for (const p of [a, b]) p.server.end('shutting_down', 'done')
    await Promise.all([a.closed, b.closed])
    assert.equal(kept, false, 'the last batch sent is still reachable')
    assert.deepEqual(a.got, ['{"seq":1}', '{"seq":2}', '{"seq":3}'])
    assert.deepEqual(b.got, a.got)
  })

  for (const deflate of [false, true]) {
    it(`sends a committed batch (sendFrames) to several clients: every frame, in order, from its bytes or its text${deflate ? ' (permessage-deflate: frame by frame through ws.send)' : ''}`, async () => {
      const a = await pair(deflate)
      const b = await pair(deflate)
      // Every length class; bytes given for most (as the session encodes them), text alone for some.
      const batch = LENGTHS.map((n, i) => {
        const frame = n === 0 ? '' : `${i}é`.padEnd(n - 1, 'x')
        return i % 3 === 2 ? { seq: i + 1, frame } : { seq: i + 1, frame, bytes: Buffer.from(frame) }
      })
      a.server.send('before')
      for (const p of [a, b]) p.server.sendFrames(batch)
      // A second batch: the first one's frames are not sent again.
      const next = [{ seq: 100, frame: '{"seq":100}', bytes: Buffer.from('{"seq":100}') }]
      for (const p of [b, a]) p.server.sendFrames(next)
      for (const p of [a, b]) p.server.end('shutting_down', 'done')
      await Promise.all([a.closed, b.closed])
      const frames = [...batch, ...next].map((e) => e.frame)
      assert.deepEqual(a.got, ['before', ...frames])
      assert.deepEqual(b.got, frames)
    })
  }
})
