/**
 * A WebSocket upgrade whose URL the router cannot read (a malformed
 * %-escape) gets its 400 `bad_request`, and then its connection is closed,
 * as for every other refused upgrade. It used to stay open on the gateway's
 * side even once the client had gone: anyone, with no credentials, could
 * fill MAX_CONNECTIONS with such sockets (every new connection then dropped),
 * and a gateway holding one never finished closing.
 */
import assert from 'node:assert/strict'
import { type Socket, connect } from 'node:net'
import { describe, it } from 'node:test'
import { type TestGateway, eventually, gateway } from '../support/gateway.js'

const UPGRADE = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: MDEyMzQ1Njc4OWFiY2RlZg==\r\nSec-WebSocket-Protocol: claude-gateway.v1\r\n'

/** Sends `request` on a new connection: what came back so far, and whether the connection is closed. */
function exchange (gw: TestGateway, request: string): { socket: Socket, text: () => string, closed: () => boolean } {
  const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
  let text = ''
  let closed = false
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => { text += chunk })
  socket.on('error', () => {})
  socket.on('close', () => { closed = true })
  socket.write(request)
  return { socket, text: () => text, closed: () => closed }
}

describe('an upgrade with a malformed URL', () => {
  it('is answered 400 bad_request and its connection closed: it takes no place under MAX_CONNECTIONS', async (t) => {
    const gw = await gateway(t, { env: { MAX_CONNECTIONS: '3' } })
    const sockets: Socket[] = []
    // The gateway's ends too, before its close (t.after): one left open would keep that waiting for ever.
    gw.app.server.on('connection', (socket: Socket) => sockets.push(socket))
    try {
      const refused = []
      for (let i = 0; i < 3; i++) {
        const c = exchange(gw, `GET /v1/sessions/%ZZ/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n${UPGRADE}\r\n`)
        sockets.push(c.socket)
        await eventually(() => c.text().includes('}'), 5000, 'the refusal')
        assert.match(c.text(), /^HTTP\/1\.1 400 /)
        assert.equal(JSON.parse(c.text().slice(c.text().indexOf('{'))).code, 'bad_request')
        c.socket.end() // the client leaves
        refused.push(c)
      }
      // No place is held by them: a new connection is served.
      await eventually(async () => {
        const health = exchange(gw, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
        sockets.push(health.socket)
        await eventually(() => health.text().includes('{"status":"ok"}') || health.closed(), 5000, 'a health answer or a drop')
        return health.text().startsWith('HTTP/1.1 200 ')
      }, 5000, 'a new connection to be served')
      for (const c of refused) await eventually(() => c.closed(), 5000, 'the refused upgrade\'s connection closed')
    } finally {
      for (const socket of sockets) socket.destroy()
    }
  })
})
