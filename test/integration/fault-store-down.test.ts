/**
 * The event store (a private Redis) goes down and comes back.
 *
 * While it is down, every request that needs it answers 503
 * `store_unavailable` (never 500 `internal` with a stack in the log): create,
 * list, and anything naming a session this gateway has not loaded. Sessions
 * already loaded keep answering from memory, and clients can still attach.
 * A failed create leaves no reservation behind. Once the store is back
 * everything works again; and a Redis that came back empty (no persistence)
 * gets every loaded session's record again without waiting for its next
 * status change. The container healthcheck (docker/healthcheck.mjs) reports
 * the outage, but not a gateway that is merely full.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { isHello } from '../support/frames.js'
import { type TestGateway, TOKEN_A, eventually, gateway, suiteScope } from '../support/gateway.js'
import { upgrade } from '../support/http.js'
import { type RedisServer, redisCommand, startRedisServer } from '../support/redis-server.js'
import { turn } from './resume-helpers.js'

const PREFIX = 'storedown:'
const HEALTHCHECK = fileURLToPath(new URL('../../docker/healthcheck.mjs', import.meta.url))

/** Exit code of the container healthcheck (docker/healthcheck.mjs) run against `gw`. */
function healthcheck (gw: TestGateway): Promise<number> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [HEALTHCHECK], { env: { PORT: new URL(gw.url).port }, timeout: 10_000 })
    child.once('exit', (code) => resolve(code ?? -1))
  })
}

describe('event store down', () => {
  const scope = suiteScope()
  let server: RedisServer
  let gw: TestGateway
  const logLines: any[] = []

  before(async () => {
    server = await startRedisServer()
    const sink = new Writable({
      write (chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line !== '') logLines.push(JSON.parse(line))
        done()
      }
    })
    gw = await gateway(scope, {
      env: { REDIS_URL: server.url, REDIS_PREFIX: PREFIX, MAX_SESSIONS_PER_TENANT: '2' },
      parts: { logger: pino({ level: 'warn' }, sink) }
    })
  })
  after(async () => {
    await server?.kill()
  })

  it('answers 503 store_unavailable where the store is needed and serves loaded sessions from memory', async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await turn(gw, id, holder, 'echo before the outage')
    const unknown = randomUUID()
    const logFrom = logLines.length

    await server.stop()
    const [created, listed, missing, ticket, events, ws] = await Promise.all([
      gw.request('POST', '/v1/sessions', {}),
      gw.request('GET', '/v1/sessions'),
      gw.request('GET', `/v1/sessions/${unknown}`),
      gw.request('POST', `/v1/sessions/${unknown}/ws-ticket`),
      gw.request('GET', `/v1/sessions/${unknown}/events`),
      upgrade(gw, `/v1/sessions/${unknown}/ws`, { authorization: `Bearer ${TOKEN_A}` })
    ])
    for (const [what, res] of Object.entries({ created, listed, missing, ticket, events, ws })) {
      assert.equal(res.status, 503, `${what}: ${JSON.stringify(res.body)}`)
      assert.deepEqual(res.body, { statusCode: 503, code: 'store_unavailable', message: 'The event store is unavailable' }, what)
    }
    const failures = logLines.slice(logFrom).filter((l) => l.msg === 'request failed' || (l.level >= 50 && l.err?.stack !== undefined))
    assert.deepEqual(failures, [], 'no request logged as an internal error with a stack')

    // The loaded session answers from memory, and clients can still attach to it.
    const loaded = await gw.request('GET', `/v1/sessions/${id}`)
    assert.equal(loaded.status, 200)
    assert.equal(loaded.body.id, id)
    const observer = await gw.connect(id, 'role=observer')
    await observer.waitFor(isHello)
    const from = observer.frames.length
    holder.sendUser('echo during the outage')
    await observer.waitFor((f) => f.type === 'result', 10_000, from)

    await server.start()
    await eventually(async () => (await gw.request('GET', '/v1/sessions')).status === 200, 10_000, 'listing answers again')
    // MAX_SESSIONS_PER_TENANT is 2 and one session runs: the failed create kept no slot.
    const again = await gw.request('POST', '/v1/sessions', {})
    assert.equal(again.status, 201, JSON.stringify(again.body))
    assert.equal((await gw.request('GET', `/v1/sessions/${unknown}`)).status, 404)
    assert.equal((await gw.request('GET', `/v1/sessions/${again.body.id}`)).status, 200)
    for (const stop of [id, again.body.id]) {
      assert.equal((await gw.request('DELETE', `/v1/sessions/${stop}`)).status, 200)
      await eventually(async () => (await gw.request('GET', `/v1/sessions/${stop}`)).body.status === 'stopped', 10_000, 'stopped')
    }
  })

  it('writes a loaded session\'s record again as soon as a Redis that lost it answers', async () => {
    const { id } = await gw.createSession()
    const holder = await gw.connect(id, 'after=0')
    await turn(gw, id, holder, 'echo then idle')
    const key = `${PREFIX}{${id}}:meta`
    assert.notEqual(await redisCommand(server.url, ['GET', key]), null)

    // Idle session: no status change, no event, nothing else would write it.
    // This Redis keeps nothing on disk, so it comes back empty (the gateway may write the
    // record again before this test could look, so emptiness is proven by configuration).
    assert.deepEqual(await redisCommand(server.url, ['CONFIG', 'GET', 'save']), ['save', ''])
    assert.deepEqual(await redisCommand(server.url, ['CONFIG', 'GET', 'appendonly']), ['appendonly', 'no'])
    await server.stop()
    await server.start()

    const stored = await eventually(async () => await redisCommand(server.url, ['GET', key]) ?? false, 10_000, 'the record written again')
    assert.equal(JSON.parse(stored as string).id, id)
    const listed = await gw.request('GET', '/v1/sessions')
    assert.equal(listed.status, 200)
    assert.ok(listed.body.sessions.some((s: any) => s.id === id), 'listed again')
  })

  it('the container healthcheck fails while the store is down, not when the gateway is full', async (t) => {
    assert.equal(await healthcheck(gw), 0)
    await server.stop()
    try {
      assert.equal((await gw.request('GET', '/readyz')).body.store.state, 'degraded')
      assert.equal(await healthcheck(gw), 1)
    } finally {
      await server.start()
    }
    await eventually(async () => await healthcheck(gw) === 0, 10_000, 'healthy again')

    const full = await gateway(t, { env: { MAX_SESSIONS: '1' } })
    await full.createSession()
    const ready = await full.request('GET', '/readyz')
    assert.equal(ready.status, 503)
    assert.equal(ready.body.status, 'unavailable')
    assert.equal(await healthcheck(full), 0, 'a full gateway is healthy')
  })
})
