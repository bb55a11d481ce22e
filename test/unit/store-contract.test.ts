/**
 * Runs the EventStore contract against both implementations, plus checks
 * specific to Redis (key layout, lazy index cleanup, error handling).
 *
 * The Redis cases use TEST_REDIS_URL when set, else 127.0.0.1:6379; each store
 * gets a unique random prefix whose keys are deleted afterwards. The run on a
 * Redis Cluster is store-contract-cluster.test.ts (a file of its own, so the
 * runner runs it beside this one).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { type Socket, createServer } from 'node:net'
import { afterEach, describe, it } from 'node:test'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import type { RetentionOptions } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, events, session, storeContract } from '../support/store-contract.js'
import { eventually } from '../support/waiters.js'

storeContract('memory', async (retention) => {
  const store = new MemoryStore({ retention })
  return { store, cleanup: () => store.close() }
}, { trimSlack: (max) => Math.max(1, Math.floor(max / 10)) })

function makeRedis (retention: RetentionOptions): { store: RedisStore; prefix: string; cleanup: () => Promise<void>; peer: () => Promise<RedisStore> } {
  const prefix = `cgw-test:${randomUUID()}:`
  const store = new RedisStore({ url: REDIS_URL, prefix, retention })
  const peers: RedisStore[] = []
  return {
    store,
    prefix,
    peer: async () => {
      const peer = new RedisStore({ url: REDIS_URL, prefix, retention })
      peers.push(peer)
      return peer
    },
    cleanup: async () => {
      for (const s of [store, ...peers.splice(0)]) await s.close()
      await deleteKeys(REDIS_URL, prefix)
    }
  }
}

storeContract('redis', async (retention) => makeRedis(retention), { trimSlack: () => 100 })

describe('RedisStore specifics', () => {
  const open: (() => Promise<void>)[] = []
  const make = (retention: Partial<RetentionOptions> = {}): { store: RedisStore; prefix: string } => {
    const made = makeRedis({ ...DEFAULT_RETENTION, ...retention })
    open.push(made.cleanup)
    return made
  }
  afterEach(async () => {
    for (const cleanup of open.splice(0)) await cleanup()
  })

  it('uses the documented key layout', async () => {
    const { store, prefix } = make({ ttlSecondsAfterEnd: 3600 })
    await store.putSession(session({ id: 'abc', tenant: 'ten', created_at: '2025-01-02T03:04:05.678Z' }))
    await store.append('abc', events(1, 3))
    assert.equal(await redisCommand(REDIS_URL, ['TYPE', `${prefix}{abc}:events`]), 'stream')
    const entries = await redisCommand(REDIS_URL, ['XRANGE', `${prefix}{abc}:events`, '-', '+'])
    assert.deepEqual(entries, events(1, 3).map((e) => [`${e.seq}-0`, ['f', e.frame]]))
    assert.deepEqual(JSON.parse(await redisCommand(REDIS_URL, ['GET', `${prefix}{abc}:meta`]) as string), session({ id: 'abc', tenant: 'ten', created_at: '2025-01-02T03:04:05.678Z' }))
    assert.deepEqual(await redisCommand(REDIS_URL, ['ZRANGE', `${prefix}tenant:ten:sessions`, 0, -1, 'WITHSCORES']), ['abc', String(Date.parse('2025-01-02T03:04:05.678Z'))])
    assert.deepEqual(await redisCommand(REDIS_URL, ['SMEMBERS', `${prefix}live`]), ['abc'])
    // Both session keys hash to one slot.
    const slots = await Promise.all(['events', 'meta'].map((k) => redisCommand(REDIS_URL, ['CLUSTER', 'KEYSLOT', `${prefix}{abc}:${k}`]).catch(() => null)))
    if (slots[0] !== null) assert.equal(slots[0], slots[1])
    // Final status: both keys get the TTL and leave the live set; running again: persistent.
    await store.putSession(session({ id: 'abc', tenant: 'ten', status: 'stopped' }))
    for (const k of ['events', 'meta']) {
      const ttl = await redisCommand(REDIS_URL, ['TTL', `${prefix}{abc}:${k}`]) as number
      assert.ok(ttl > 3500 && ttl <= 3600, `${k} ttl ${ttl}`)
    }
    assert.deepEqual(await redisCommand(REDIS_URL, ['SMEMBERS', `${prefix}live`]), [])
    await store.putSession(session({ id: 'abc', tenant: 'ten', status: 'running' }))
    for (const k of ['events', 'meta']) assert.equal(await redisCommand(REDIS_URL, ['TTL', `${prefix}{abc}:${k}`]), -1, k)
  })

  it('keeps the webhook outbox in the documented keys, all on the slot of {webhooks}', async () => {
    const { store, prefix } = make()
    await store.outbox.keep('node-a', { id: 'd1', text: 'one' })
    await store.outbox.keep('node-a', { id: 'd2', text: 'two' })
    assert.deepEqual(await redisCommand(REDIS_URL, ['HGETALL', `${prefix}{webhooks}:out:node-a`]), ['d1', 'one', 'd2', 'two'])
    assert.deepEqual(await redisCommand(REDIS_URL, ['SMEMBERS', `${prefix}{webhooks}:nodes`]), ['node-a'])
    await store.outbox.takeOver('node-a', 'node-b')
    assert.equal(await redisCommand(REDIS_URL, ['EXISTS', `${prefix}{webhooks}:out:node-a`]), 0, 'the hash taken over is gone')
    assert.deepEqual(await redisCommand(REDIS_URL, ['HGETALL', `${prefix}{webhooks}:out:node-b`]), ['d1', 'one', 'd2', 'two'])
    assert.deepEqual(await redisCommand(REDIS_URL, ['SMEMBERS', `${prefix}{webhooks}:nodes`]), ['node-b'])
    const slots = await Promise.all(['out:node-a', 'out:{other}', 'nodes'].map((k) => redisCommand(REDIS_URL, ['CLUSTER', 'KEYSLOT', `${prefix}{webhooks}:${k}`]).catch(() => null)))
    if (slots[0] !== null) assert.deepEqual(new Set(slots).size, 1, 'a node name with braces keeps the outbox tag')
  })

  it('trims with MAXLEN ~ and keeps the last id, so trimmed seqs are not re-added', async () => {
    const { store, prefix } = make({ maxEventsPerSession: 10 })
    for (let from = 1; from <= 500; from += 50) await store.append('t', events(from, from + 49))
    const length = await redisCommand(REDIS_URL, ['XLEN', `${prefix}{t}:events`]) as number
    assert.ok(length >= 10 && length <= 110, `XLEN ${length}`)
    await store.append('t', events(1, 500))
    assert.equal(await redisCommand(REDIS_URL, ['XLEN', `${prefix}{t}:events`]), length)
  })

  it('removes index members whose record expired, lazily on listing', async () => {
    const { store, prefix } = make({ ttlSecondsAfterEnd: 1 })
    await store.putSession(session({ id: 'old', tenant: 't', status: 'exited', created_at: '2025-01-01T00:00:00.000Z' }))
    await store.putSession(session({ id: 'new', tenant: 't', status: 'running', created_at: '2025-01-02T00:00:00.000Z' }))
    const index = `${prefix}tenant:t:sessions`
    await eventually(async () => await store.getSession('old') === null, 10_000, 'old to expire')
    assert.deepEqual(await redisCommand(REDIS_URL, ['ZRANGE', index, 0, -1]), ['old', 'new'])
    const page = await store.listSessions('t', { limit: 1 })
    assert.deepEqual(page.sessions.map((r) => r.id), ['new'])
    assert.equal(page.next_cursor, null)
    assert.deepEqual(await redisCommand(REDIS_URL, ['ZRANGE', index, 0, -1]), ['new'])
  })

  it('fills a page past many expired members', async () => {
    const { store, prefix } = make()
    const index = `${prefix}tenant:t:sessions`
    // 100 index members with no record (as after expiry), newer than the real ones.
    const stale: (string | number)[] = []
    for (let i = 0; i < 100; i++) stale.push(Date.parse('2025-06-01T00:00:00.000Z') + i, `ghost-${i}`)
    await redisCommand(REDIS_URL, ['ZADD', index, ...stale])
    for (let i = 0; i < 3; i++) await store.putSession(session({ id: `real-${i}`, tenant: 't', created_at: new Date(Date.parse('2025-01-01T00:00:00.000Z') + i).toISOString() }))
    const page = await store.listSessions('t', { limit: 2 })
    assert.deepEqual(page.sessions.map((r) => r.id), ['real-2', 'real-1'])
    const rest = await store.listSessions('t', { limit: 2, cursor: page.next_cursor as string })
    assert.deepEqual(rest.sessions.map((r) => r.id), ['real-0'])
    assert.equal(rest.next_cursor, null)
    assert.equal(await redisCommand(REDIS_URL, ['ZCARD', index]), 3)
  })

  it('drops a session from the old tenant index when its tenant changes', async () => {
    const { store } = make()
    await store.putSession(session({ id: 'moved', tenant: 'a' }))
    await store.putSession(session({ id: 'moved', tenant: 'b' }))
    assert.deepEqual((await store.listSessions('a', { limit: 5 })).sessions, [])
    assert.deepEqual((await store.listSessions('b', { limit: 5 })).sessions.map((r) => r.id), ['moved'])
  })

  it('listLive drops members whose record is gone or final', async () => {
    const { store, prefix } = make()
    await store.putSession(session({ id: 'live', status: 'running' }))
    await redisCommand(REDIS_URL, ['SADD', `${prefix}live`, 'ghost'])
    assert.deepEqual((await store.listLive()).map((r) => r.id), ['live'])
    assert.deepEqual(await redisCommand(REDIS_URL, ['SMEMBERS', `${prefix}live`]), ['live'])
  })

  it('rejects an append failing for another reason than a held seq', async () => {
    const { store, prefix } = make()
    await redisCommand(REDIS_URL, ['SET', `${prefix}{bad}:events`, 'not a stream'])
    await assert.rejects(store.append('bad', events(1, 2)), /WRONGTYPE/)
    // A partly held batch still appends the rest.
    await store.append('ok', events(1, 3))
    await store.append('ok', events(2, 6))
    assert.deepEqual(await store.read('ok', 0, 10), events(1, 6))
  })

  it('refuses a prefix with hash-tag braces and an empty session id', async () => {
    assert.throws(() => new RedisStore({ url: REDIS_URL, prefix: 'a{b}:', retention: DEFAULT_RETENTION }), /must not contain/)
    const { store } = make()
    await assert.rejects(store.append('', events(1, 1)), /must not be empty/)
  })

  it('reports status and answers ping', async () => {
    const { store } = make()
    await store.ping()
    assert.equal(store.status, 'ready')
    assert.equal(store.kind, 'redis')
  })

  it('rejects within commandTimeoutMs when Redis accepts connections but never answers', async () => {
    const sockets = new Set<Socket>()
    const server = createServer((socket) => { sockets.add(socket); socket.on('error', () => {}) }).listen(0, '127.0.0.1')
    await once(server, 'listening')
    const port = (server.address() as { port: number }).port
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, prefix: 'cgw-test-mute:', retention: DEFAULT_RETENTION, commandTimeoutMs: 500 })
    try {
      for (const call of [() => store.append('s', events(1, 2)), () => store.read('s', 0, 1), () => store.ping()]) {
        const started = Date.now()
        await assert.rejects(call(), /timed out/)
        const took = Date.now() - started
        assert.ok(took < 1500, `rejected after ${took} ms`)
      }
    } finally {
      const started = Date.now()
      await store.close()
      assert.ok(Date.now() - started < 1500, 'close does not hang')
      for (const socket of sockets) socket.destroy()
      server.close()
    }
  })

  it('rejects quickly when Redis is unreachable, and ping fails', async () => {
    // A port with nothing listening: reserve one and close it.
    const server = createServer().listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    const port = (server.address() as { port: number }).port
    await new Promise((resolve) => server.close(resolve))
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, prefix: 'cgw-test-down:', retention: DEFAULT_RETENTION })
    try {
      for (const call of [() => store.append('s', events(1, 2)), () => store.getSession('s'), () => store.ping(), () => store.putSession(session({ id: 's' }))]) {
        const started = Date.now()
        await assert.rejects(call())
        const took = Date.now() - started
        assert.ok(took < 2000, `rejected after ${took} ms`)
      }
      assert.notEqual(store.status, 'ready')
      assert.ok(store.lastError !== null)
    } finally {
      const started = Date.now()
      await store.close()
      assert.ok(Date.now() - started < 2500)
    }
  })
})
