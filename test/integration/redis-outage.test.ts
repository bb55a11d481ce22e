/**
 * Redis goes away while a session is producing, and comes back.
 *
 * While it is down, live relay goes on (the attached client gets every seq),
 * clients are told the store is degraded (`store` frames, `hello`), `/readyz`
 * says degraded, and the events API serves the frames the gateway holds in
 * memory. Once Redis answers again the held frames are written in order.
 *
 * The private redis-server runs without persistence, so the restarted one is
 * EMPTY: frames Redis had acknowledged before the outage are gone with it,
 * and nothing in the gateway could bring them back (it keeps only what it
 * could not store). What is guaranteed, and asserted: every frame from the
 * first batch whose write failed onwards — the one relayed just before the
 * `degraded` notice, everything during the outage, everything after — is in
 * history exactly once, in order, byte-equal to what was relayed; and the
 * session record is saved again so the session is listed.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { isHello } from '../support/frames.js'
import { type TestGateway, eventually, gateway, suiteScope } from '../support/gateway.js'
import { type RedisServer, startRedisServer } from '../support/redis-server.js'
import { readHistory, settled, turn } from './resume-helpers.js'

describe('Redis restart while a session is producing', () => {
  const scope = suiteScope()
  let server: RedisServer
  let gw: TestGateway

  before(async () => {
    server = await startRedisServer()
    gw = await gateway(scope, { env: { REDIS_URL: server.url, REDIS_PREFIX: 'outage:' } })
  })
  after(async () => {
    await server?.kill()
  })

  it('relays every frame during the outage and stores every unsaved one once Redis is back', async () => {
    const { id } = await gw.createSession()
    const client = await gw.connect(id, 'after=0')
    const hello = await client.waitFor(isHello)
    assert.equal(hello.store, 'ok')
    assert.equal((await gw.request('GET', '/readyz')).status, 200)

    const from = client.frames.length
    client.sendUser('slow 250 10')
    await client.waitFor((f) => f.type === 'assistant', 10_000, from)

    // ---- Redis goes away mid-turn.
    await server.stop()
    const notice = await client.waitFor((f) => f.type === 'gateway' && f.subtype === 'store', 10_000, from)
    assert.equal(notice.state, 'degraded')
    const noticeAt = client.frames.indexOf(notice)
    // The batch whose write failed was relayed just before the notice.
    const lastBeforeNotice = client.frames.slice(0, noticeAt).filter((f) => typeof f.seq === 'number').at(-1).seq as number

    // Live relay goes on while Redis is down.
    await client.until(() => client.frames.slice(noticeAt).filter((f) => f.type === 'assistant').length >= 10, 10_000, 'frames during the outage')

    const ready = await gw.request('GET', '/readyz')
    assert.equal(ready.status, 503)
    assert.equal(ready.body.status, 'degraded')
    assert.equal(ready.body.store.state, 'degraded')
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.store, 'degraded')

    const observer = await gw.connect(id, 'role=observer')
    const observerHello = await observer.waitFor(isHello)
    assert.equal(observerHello.store, 'degraded')

    // History the store cannot give is served from what the gateway holds.
    const held = await gw.request('GET', `/v1/sessions/${id}/events?after=${lastBeforeNotice}&limit=1000`)
    assert.equal(held.status, 200)
    assert.ok(held.body.events.length >= 10)
    const relayed = new Map(client.seqFrames.map((f) => [f.seq, f]))
    for (const e of held.body.events) assert.deepEqual(e, relayed.get(e.seq))
    const older = await gw.request('GET', `/v1/sessions/${id}/events?after=0`)
    assert.equal(older.status, 503, 'what only the store holds cannot be read while it is down')
    assert.equal(older.body.code, 'store_unavailable')

    // ---- Redis comes back (empty).
    await server.start()
    const ok = await client.waitFor((f) => f.type === 'gateway' && f.subtype === 'store' && f.state === 'ok', 20_000, noticeAt + 1)
    const okAt = client.frames.indexOf(ok)
    await settled(gw, id, client, 20_000, from)
    // One more turn entirely after the outage.
    const end = await turn(gw, id, client, 'burst 50')
    assert.ok(client.frames.slice(okAt).some((f) => f.type === 'assistant'), 'frames after Redis was back')
    await eventually(async () => (await gw.request('GET', '/readyz')).status === 200, 10_000, 'readyz ok again')
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.store, 'ok')

    // The client got every seq once, in order: live relay never stopped.
    const seqs = client.seqFrames.map((f) => f.seq)
    assert.deepEqual(seqs, Array.from({ length: end }, (_, i) => i + 1))

    // History: contiguous up to the end, from no later than the first failed batch.
    const history = await readHistory(gw, id)
    const first = history[0].seq as number
    assert.ok(first <= lastBeforeNotice, `history starts at ${first}, after the first unsaved frame ${lastBeforeNotice}`)
    assert.deepEqual(history.map((f) => f.seq), Array.from({ length: end - first + 1 }, (_, i) => first + i), 'every seq once, in order')
    assert.deepEqual(history, client.seqFrames.slice(first - 1), 'exactly the frames that were relayed')

    // The record lost with Redis' data is saved again: the session is listed.
    const listed = await gw.request('GET', '/v1/sessions')
    assert.ok(listed.body.sessions.some((s: any) => s.id === id), 'session listed after the Redis restart')
  })

  it('a client resuming after Redis lost every frame is told "gap", not "ok"', async () => {
    const { id } = await gw.createSession()
    const client = await gw.connect(id, 'after=0')
    const end = await turn(gw, id, client, 'echo before the restart')

    // Idle session: nothing is written while Redis restarts, so the gateway holds nothing either.
    await server.stop()
    await server.start()
    await eventually(async () => (await gw.request('GET', '/readyz')).status === 200, 10_000, 'readyz ok')
    assert.deepEqual((await gw.request('GET', `/v1/sessions/${id}/events`)).body, { events: [], has_more: false, next_after: null })

    const back = await gw.connect(id, 'after=3&role=observer')
    const hello = await back.waitFor(isHello)
    assert.equal(hello.resume, 'gap', 'frames 4..last_seq cannot be replayed')
    assert.equal(hello.oldest_seq, null)
    assert.equal(hello.last_seq, end)

    // Live frames still follow, and once stored they are the oldest there is.
    const next = await turn(gw, id, client, 'echo after the restart')
    await back.until(() => back.seqFrames.some((f) => f.seq === next))
    assert.ok(back.seqFrames.every((f) => f.seq > end))
    const history = await readHistory(gw, id)
    assert.equal(history[0].seq, end + 1)
    assert.deepEqual(back.seqFrames, history)

    const again = await gw.connect(id, 'after=3&role=observer')
    const againHello = await again.waitFor(isHello)
    assert.equal(againHello.resume, 'gap')
    assert.equal(againHello.oldest_seq, end + 1)
    await again.until(() => again.seqFrames.some((f) => f.seq === next))
    assert.deepEqual(again.seqFrames, history)
  })
})
