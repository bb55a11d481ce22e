/**
 * A session record in Redis that is not JSON, or a key of another type in
 * its place, written by someone who can write Redis but has no STORE_SECRET.
 * It must be refused like any record the gateway did not sign (absent,
 * logged, counted), and only it: before, its read threw, so every listing
 * of its tenant and every listLive (start-up recovery, the lapsed-lease
 * sweep of every node) failed for as long as it stayed in the index.
 * Real Redis (TEST_REDIS_URL or 127.0.0.1:6379), a fresh prefix per case.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import pino from 'pino'
import { RedisStore } from '../../src/store/redis.js'
import { SignedStore } from '../../src/store/signed-records.js'
import type { SessionRecord } from '../../src/store/store.js'
import { REDIS_URL, deleteKeys, redisCommand } from '../support/redis-server.js'
import { DEFAULT_RETENTION, session } from '../support/store-contract.js'

const SECRET = 'r'.repeat(43)

/** A record of tenant-a under a fresh id. */
const record = (overrides: Partial<SessionRecord> = {}): SessionRecord => session({ id: randomUUID(), tenant: 'tenant-a', ...overrides })

describe('a session record in Redis that cannot be read as one', () => {
  const cleanups: Array<() => Promise<void>> = []
  afterEach(async () => { for (const c of cleanups.splice(0)) await c() })

  const make = (): { store: SignedStore, prefix: string, counted: string[] } => {
    const prefix = `cgw-test:${randomUUID()}:`
    const inner = new RedisStore({ url: REDIS_URL, prefix, retention: DEFAULT_RETENTION })
    cleanups.push(async () => { await inner.close(); await deleteKeys(REDIS_URL, prefix) })
    const counted: string[] = []
    const store = new SignedStore(inner, {
      secret: SECRET,
      allowBypassPermissions: false,
      logger: pino({ level: 'silent' }),
      onRefused: (kind, why) => { counted.push(`${kind}/${why}`) }
    })
    return { store, prefix, counted }
  }

  /** What the attacker writes: an entry under `id` in tenant-a's index and the live set, its meta as `write` leaves it. */
  const plant = async (prefix: string, id: string, write: (meta: string) => Promise<unknown>): Promise<void> => {
    await write(`${prefix}{${id}}:meta`)
    await redisCommand(REDIS_URL, ['ZADD', `${prefix}tenant:tenant-a:sessions`, Date.now() + 60_000, id])
    await redisCommand(REDIS_URL, ['SADD', `${prefix}live`, id])
  }

  for (const [what, write] of [
    ['text that is not JSON', async (meta: string) => await redisCommand(REDIS_URL, ['SET', meta, '{"id": not json'])],
    ['a hash instead of a string', async (meta: string) => await redisCommand(REDIS_URL, ['HSET', meta, 'tenant', 'tenant-a'])]
  ] as const) {
    it(`${what}: refused and counted, its tenant's other sessions still listed and recovered`, async () => {
      const { store, prefix, counted } = await make()
      const good = record()
      await store.putSession(good)
      const bad = randomUUID()
      await plant(prefix, bad, write)

      assert.equal(await store.getSession(bad), null)
      assert.deepEqual((await store.listSessions('tenant-a', { limit: 10 })).sessions.map((s) => s.id), [good.id])
      assert.deepEqual((await store.listLive()).map((s) => s.id), [good.id])
      assert.ok(counted.length >= 2 && counted.every((c) => c === 'record/unsigned'), counted.join())
    })
  }
})
