/**
 * A client that goes away while the gateway still looks its session up (a
 * store read: here a paused Redis) gives back its tenant connection slot
 * (MAX_CONNECTIONS_PER_TENANT) and is never left attached to the session.
 * Both routes used to add their close listener after that close had come,
 * so the slot stayed taken for as long as the gateway ran: with
 * MAX_CONNECTIONS_PER_TENANT such clients the tenant was locked out.
 */
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { type TestGateway, TOKEN_A, eventually, gateway, suiteScope } from '../support/gateway.js'
import { upgradeStatus } from '../support/http.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'

describe('a client gone during the session lookup', () => {
  const scope = suiteScope()
  let server: RedisServer
  let gw: TestGateway
  let id: string

  before(async () => {
    server = await startRedisServer()
    gw = await gateway(scope, { env: { REDIS_URL: server.url, REDIS_PREFIX: 'gone-during-lookup:', MAX_CONNECTIONS_PER_TENANT: '1' } })
    id = (await gw.createSession()).id
    // Stopped: not running here, so each lookup reads its record from the store.
    await gw.request('DELETE', `/v1/sessions/${id}`)
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.status === 'stopped', 10_000, 'the session stopped')
  })
  after(async () => { await server?.kill() })

  /** Sends `head` while the store is paused, lets `leave` end the connection, and resumes the store once `left` says the gateway saw it. */
  async function leaveDuringLookup (head: string, leave: (socket: ReturnType<typeof connect>) => Promise<void>): Promise<void> {
    server.pause()
    try {
      const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
      socket.on('error', () => {})
      await new Promise((resolve) => socket.once('connect', resolve))
      socket.write(`${head}Host: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN_A}\r\n\r\n`)
      await leave(socket)
    } finally {
      server.resume()
    }
  }

  /** The tenant's one slot comes free: a stream of the session is taken again, and once it ends no client is left. */
  async function slotFreeAgain (t: { after: (fn: () => void) => void }): Promise<void> {
    const stream = new AbortController()
    t.after(() => stream.abort())
    const status = await eventually(async () => {
      const res = await fetch(`${gw.url}/v1/sessions/${id}/events/stream`, { headers: { authorization: `Bearer ${TOKEN_A}` }, signal: stream.signal })
      if (res.status === 200) return 200
      await res.body?.cancel()
      return false
    }, 5000, 'the tenant\'s connection slot to be free')
    assert.equal(status, 200)
    stream.abort()
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.clients === 0, 5000, 'no client attached to the session')
  }

  it('an event stream whose client ends the connection', async (t) => {
    await leaveDuringLookup(`GET /v1/sessions/${id}/events/stream HTTP/1.1\r\n`, async (socket) => {
      socket.end()
      socket.resume()
      // The gateway closes its side in answer: it has seen the end.
      await new Promise((resolve) => socket.once('close', resolve))
    })
    await slotFreeAgain(t)
  })

  it('a WebSocket upgrade whose client resets the connection', async (t) => {
    const key = Buffer.from('0123456789abcdef').toString('base64')
    await leaveDuringLookup(`GET /v1/sessions/${id}/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Protocol: claude-gateway.v1\r\n`, async (socket) => {
      // An answer on a later connection: the gateway has read what came before it (the request, then the reset).
      assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
      socket.resetAndDestroy()
      assert.equal((await fetch(`${gw.url}/healthz`)).status, 200)
    })
    await slotFreeAgain(t)
    assert.equal((await upgradeStatus(`${gw.wsUrl}/v1/sessions/${id}/ws?role=observer`, TOKEN_A)).status, 101)
  })
})
