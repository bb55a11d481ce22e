/**
 * The Redis store behind the gateway: the WebSocket resume scenarios of
 * resume-ws.test.ts, and history that outlives the gateway process — a
 * restarted gateway on the same Redis and DATA_DIR lists the session, serves
 * its events, and continues the conversation with `--resume <id>`.
 *
 * Uses TEST_REDIS_URL (default redis://127.0.0.1:6379) with a unique key prefix per
 * gateway, deleted afterwards.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, afterEach, before, describe, it } from 'node:test'
import { RedisStore } from '../../src/store/redis.js'
import type { EventStore } from '../../src/store/store.js'
import { isHello } from '../support/frames.js'
import { type Scope, type TestGateway, gateway, suiteScope } from '../support/gateway.js'
import { REDIS_URL, deleteKeys } from '../support/redis-server.js'
import { assertSameAsHistory, readHistory, resumeScenarios, statusBecomes, turn } from './resume-helpers.js'

const RETENTION = { maxEventsPerSession: 100_000, ttlSecondsAfterEnd: 3600 }

function redisEnv (prefix: string): Record<string, string> {
  return { REDIS_URL, REDIS_PREFIX: prefix }
}

describe('WebSocket resume (Redis store)', () => {
  const scope = suiteScope()
  let gw: TestGateway
  const prefix = `cgw-test:${randomUUID()}:`

  before(async () => {
    gw = await gateway(scope, { env: redisEnv(prefix) })
    assert.equal(gw.app.gateway.store.kind, 'redis')
  })
  after(async () => {
    await deleteKeys(REDIS_URL, prefix)
  })

  resumeScenarios(() => gw)
})

describe('history across a gateway restart (Redis store)', () => {
  const cleanups: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })
  /** Gateways belong to the test too: closed, newest first, before its prefix and DATA_DIR go. */
  const scope: Scope = { after: (fn) => { cleanups.push(async () => { await fn() }) } }

  /** A prefix and a DATA_DIR shared by the gateways of one test, removed afterwards. */
  function shared (): { prefix: string, dataDir: string } {
    const prefix = `cgw-test:${randomUUID()}:`
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-restart-'))
    cleanups.push(async () => {
      await deleteKeys(REDIS_URL, prefix)
      await rm(dataDir, { recursive: true, force: true })
    })
    return { prefix, dataDir }
  }

  async function start (prefix: string, dataDir: string, store?: EventStore): Promise<TestGateway> {
    return await gateway(scope, { env: redisEnv(prefix), dataDir, parts: store === undefined ? {} : { store } })
  }

  /** Checks the restarted gateway continues the conversation: the CLI is started again with --resume <id>. */
  async function continues (gw: TestGateway, id: string, before: any[]): Promise<void> {
    const spawnsBefore = gw.argvDumps(id).length
    const client = await gw.connect(id)
    const hello = await client.waitFor(isHello)
    assert.equal(hello.role, 'controller')
    const end = await turn(gw, id, client, 'echo after restart')
    const spawns = gw.argvDumps(id)
    assert.equal(spawns.length, spawnsBefore + 1, 'one new CLI process')
    const argv = spawns[spawns.length - 1]?.argv ?? []
    assert.equal(argv[argv.indexOf('--resume') + 1], id, `--resume <id> in ${JSON.stringify(argv)}`)
    assert.ok(!argv.includes('--session-id'))
    assert.equal((await gw.request('GET', `/v1/sessions/${id}`)).body.status, 'running')

    // The new frames follow the old ones: one log, seqs 1..end, no seq reused.
    const history = await readHistory(gw, id)
    assert.deepEqual(history.map((f) => f.seq), Array.from({ length: end }, (_, i) => i + 1))
    assert.deepEqual(history.slice(0, before.length), before)
    assert.ok(history.slice(before.length).some((f) => f.type === 'result' && f.result === 'Echo: echo after restart'))
  }

  it('a session stopped by a gateway shutdown is listed, readable and resumable on the next gateway', async () => {
    const { prefix, dataDir } = shared()
    const a = await start(prefix, dataDir)
    const { id } = await a.createSession({ metadata: { name: 'restart me' } })
    const client = await a.connect(id, 'after=0')
    const end = await turn(a, id, client, 'burst 200')
    assert.deepEqual(await readHistory(a, id), client.seqFrames)
    await a.close()

    const b = await start(prefix, dataDir)
    const listed = await b.request('GET', '/v1/sessions')
    assert.equal(listed.status, 200)
    const entry = listed.body.sessions.find((s: any) => s.id === id)
    assert.ok(entry, 'listed after the restart')
    assert.equal(entry.status, 'stopped')
    assert.deepEqual(entry.metadata, { name: 'restart me' })

    const snapshot = (await b.request('GET', `/v1/sessions/${id}`)).body
    assert.equal(snapshot.status, 'stopped')
    assert.equal(snapshot.exit.reason, 'stopped')
    assert.equal(snapshot.pid, null)

    // Everything the live client saw, then the shutdown's own status frames.
    const history = await readHistory(b, id)
    assert.ok(history.length > end)
    assertSameAsHistory(history.slice(0, client.seqFrames.length), client.seqFrames)
    assert.deepEqual(history.slice(client.seqFrames.length).map((f) => [f.type, f.subtype, f.status]), [
      ['gateway', 'status', 'stopping'],
      ['gateway', 'status', 'stopped']
    ])
    assert.equal(snapshot.last_seq, history[history.length - 1].seq)
    assert.equal((await b.request('GET', `/v1/sessions/${id}/events?after=${end}`)).body.events.length, 2)

    await continues(b, id, history)
  })

  it('a session left running by a gateway that died is marked stopped with exit.reason "lost"', async () => {
    const { prefix, dataDir } = shared()
    // Gateway A's store stops writing at `frozen`, as if the process had died there: what
    // its shutdown would record (status stopping/stopped, the final record) never lands.
    const redis = new RedisStore({ url: REDIS_URL, prefix, retention: RETENTION })
    cleanups.push(() => redis.close())
    let frozen = false
    const store: EventStore = new Proxy(redis, {
      get (target, key) {
        if (frozen && (key === 'append' || key === 'putSession')) return async () => {}
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      }
    })
    const a = await start(prefix, dataDir, store)
    const { id } = await a.createSession()
    const client = await a.connect(id, 'after=0')
    await turn(a, id, client, 'burst 100')
    const seen = client.seqFrames
    assert.equal((await a.request('GET', `/v1/sessions/${id}`)).body.status, 'running')
    frozen = true
    await a.close()

    const b = await start(prefix, dataDir)
    const listed = (await b.request('GET', '/v1/sessions')).body.sessions.find((s: any) => s.id === id)
    assert.ok(listed, 'listed after the restart')
    const snapshot = await statusBecomes(b, id, 'stopped')
    assert.equal(snapshot.exit.reason, 'lost')
    assert.equal(listed.status, 'stopped')
    assert.equal(listed.exit.reason, 'lost')

    // What was relayed, then the lost status frame gateway B recorded in the log.
    const history = await readHistory(b, id)
    assertSameAsHistory(seen, history.slice(0, -1))
    const lost = history[history.length - 1]
    assert.equal(lost.seq, seen[seen.length - 1].seq + 1)
    assert.deepEqual([lost.subtype, lost.status, lost.exit?.reason], ['status', 'stopped', 'lost'])
    assert.equal(snapshot.last_seq, lost.seq)

    await continues(b, id, history)
  })
})
