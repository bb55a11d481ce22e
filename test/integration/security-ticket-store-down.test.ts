/**
 * Redeeming a `?ticket=` needs the store (a ticket is spent there, once for
 * every node). While the store does not answer, the upgrade is refused with
 * the table's 503 `store_unavailable` (retry later with a new ticket), as
 * any other request that needs the store, and nothing is logged as an
 * internal error. It used to be a 500 `internal` with a stack in the log.
 */
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import { isHello } from '../support/frames.js'
import { TestClient, eventually, gateway } from '../support/gateway.js'
import { upgrade } from '../support/http.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'

describe('a ticket redeemed while the store is down', () => {
  let server: RedisServer | undefined
  after(async () => { await server?.kill() })

  it('is answered 503 store_unavailable, not 500; once the store answers, a new ticket opens the session', async (t) => {
    server = await startRedisServer()
    const logLines: any[] = []
    const sink = new Writable({
      write (chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line !== '') logLines.push(JSON.parse(line))
        done()
      }
    })
    const gw = await gateway(t, { env: { REDIS_URL: server.url, REDIS_PREFIX: 'ticket-store-down:' }, parts: { logger: pino({ level: 'warn' }, sink) } })
    const { id } = await gw.createSession()
    const issued = await gw.request('POST', `/v1/sessions/${id}/ws-ticket`)
    assert.equal(issued.status, 201)

    const redis = server
    await redis.stop()
    const logFrom = logLines.length
    let refused
    try {
      refused = await upgrade(gw, `/v1/sessions/${id}/ws?ticket=${encodeURIComponent(issued.body.ticket)}`)
    } finally {
      await redis.start()
    }
    assert.equal(refused.status, 503, JSON.stringify(refused.body))
    assert.deepEqual(refused.body, { statusCode: 503, code: 'store_unavailable', message: 'The event store is unavailable' })
    assert.deepEqual(logLines.slice(logFrom).filter((l) => l.msg === 'request failed'), [], 'not logged as an internal error')

    await eventually(async () => (await gw.request('GET', '/v1/sessions')).status === 200, 10_000, 'the store answering again')
    const again = await gw.request('POST', `/v1/sessions/${id}/ws-ticket`)
    const client = await TestClient.open(`${gw.wsUrl}/v1/sessions/${id}/ws?role=observer&ticket=${encodeURIComponent(again.body.ticket)}`, {})
    t.after(() => client.terminate())
    await client.waitFor(isHello)
  })
})
