/**
 * WsClient builds text frames itself and writes them to the socket (one frame
 * per event, shared by every client): over a real ws connection, every
 * payload length class (7-bit, 16-bit, 64-bit) arrives intact and in order
 * whether sent as a string or a Buffer, the same string or Buffer sent to two
 * clients reaches both, ws's own frames (ping,
 * close) keep their place among ours, and with permessage-deflate on the
 * client falls back to ws.send.
 */
import assert from 'node:assert/strict'
import type { AddressInfo, Socket } from 'node:net'
import { after, describe, it } from 'node:test'
import { WebSocket, WebSocketServer } from 'ws'
import { WsClient } from '../../src/ws/ws-client.js'

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
})
